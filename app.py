"""Prisma's entrypoint: routes to the pages and draws the shared dataset/run pickers.

Every page's URL differs from its file name on purpose. Streamlit still has a legacy router for a `pages/` folder,
which handles the first run of a server process (and every AppTest run) before `st.navigation` switches it off;
it runs a page file whose name matches the requested URL directly, skipping this script and its sidebar. With
distinct URLs it finds no such file and runs this script, which routes as below. The one trace left: when the very
first request after a server start is a page's URL (not the root), Streamlit shows "Page not found" over the right
page.
"""

import streamlit as st

from ui.state import PAGES, sidebar

st.set_page_config(page_title="Prisma", page_icon=":material/change_history:", layout="wide")
page = st.navigation(
    [
        st.Page(PAGES["home"], title="Home", icon=":material/home:", default=True),
        st.Page(PAGES["datasets"], title="Datasets", icon=":material/upload_file:", url_path="data"),
        st.Page(PAGES["embeddings"], title="Embeddings", icon=":material/scatter_plot:", url_path="embed"),
        st.Page(PAGES["train"], title="Train SAE", icon=":material/model_training:", url_path="train-sae"),
        st.Page(PAGES["features"], title="Features", icon=":material/label:", url_path="feature-browser"),
        st.Page(PAGES["families"], title="Families", icon=":material/account_tree:", url_path="family-graph"),
        st.Page(PAGES["labels"], title="Labels", icon=":material/sell:", url_path="labelling"),
        st.Page(PAGES["explore"], title="Explore", icon=":material/travel_explore:", url_path="explorer"),
    ]
)
sidebar()
page.run()
