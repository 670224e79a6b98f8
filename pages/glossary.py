"""Glossary: the few technical words Prisma uses, in plain language."""

import streamlit as st

from ui.glossary import TERMS, term_title
from ui.navigation import route_here

route_here()

st.title("Glossary")
st.markdown("The few technical words Prisma uses, and what they mean for your documents.")
for term, meaning in TERMS.items():
    st.markdown(f"**{term_title(term)}**: {meaning}")
