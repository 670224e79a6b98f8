"""Prisma core: embeddings -> sparse autoencoder -> named concepts and families. Never imports streamlit."""

__version__ = "0.1.0"
