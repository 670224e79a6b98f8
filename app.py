import streamlit as st

st.set_page_config(page_title="Prisma", page_icon="🔺", layout="wide")
st.title("Prisma")
st.write("Prisma splits document embeddings into named concepts. The app pages are being built.")
