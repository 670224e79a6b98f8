"""Prisma's entrypoint: routes to the pages and draws the shared dataset/run pickers."""

import streamlit as st

from ui.state import PAGES, sidebar

st.set_page_config(page_title="Prisma", page_icon=":material/change_history:", layout="wide")
page = st.navigation(
    [
        st.Page(PAGES["home"], title="Home", icon=":material/home:", default=True),
        st.Page(PAGES["datasets"], title="Datasets", icon=":material/upload_file:"),
        st.Page(PAGES["embeddings"], title="Embeddings", icon=":material/scatter_plot:"),
        st.Page(PAGES["train"], title="Train SAE", icon=":material/model_training:"),
        st.Page(PAGES["features"], title="Features", icon=":material/label:"),
        st.Page(PAGES["families"], title="Families", icon=":material/account_tree:"),
        st.Page(PAGES["explore"], title="Explore", icon=":material/travel_explore:"),
    ]
)
sidebar()
page.run()
