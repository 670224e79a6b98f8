"""Streamlit helpers shared by the pages: state and cached loaders, background jobs, charts, cards, safe text."""
