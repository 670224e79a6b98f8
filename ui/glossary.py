"""The few technical words the app keeps, explained for an analyst: one source for the Glossary page and the
help popovers next to numbers that use them."""

from __future__ import annotations

import streamlit as st

from prisma_core.pipeline.read_model import COMPARISON_WORDS, TREND_WORDS

TERMS: dict[str, str] = {
    "feature": "A concept the model found in your documents, such as *chest pain* or *election campaign*. Each "
    "document is described by a handful of features, each with a strength (its activation).",
    "activation": "How strongly a feature is present in a document: 0 means absent; larger means stronger. Values "
    "compare between documents of the same feature, not between features.",
    "embedding": "A list of numbers that stands for the meaning of a document, computed by a language model. "
    "Documents with similar meaning get similar embeddings.",
    "sparse autoencoder (SAE)": "The model Prisma trains on the embeddings. It learns a dictionary of features and "
    "describes every document with only a few of them, which is what makes the features readable.",
    "run": "One trained SAE on one dataset, with its settings. Train again with other settings to get another run; "
    "the sidebar picks the run every page shows.",
    "detail captured": "How much of the documents' embeddings the features reproduce, on documents kept aside "
    "during training (technically 1 - FVU, the fraction of variance unexplained). A few broad features per document "
    "keep what documents share and leave out what is particular to each: a run that explains about half of what "
    "sets each document apart (50% or more) is good, a third or more (30-50%) fair, less rough.",
    "overfitting": "The run describes the documents it was trained on much better than documents it has not seen: "
    "it memorised instead of learning general concepts. Fewer epochs, fewer features or more documents help.",
    "trainings compared": "Prisma trains the model several times, each from another random start, and keeps only "
    'the features most trainings find. "Found in 3 of 3 trainings" means the feature came back every time: train '
    'again and you will find it again. "2 of 3" means it came back most times: when trained again it may split '
    "in two or merge with a neighbour, so check its documents before relying on it.",
    "background feature": "A feature active on most documents (over half): something nearly every document has, "
    "such as a report's template or a newspaper's house style. It is shown as background, not as a topic.",
    "never-firing features": "Features active on no document (sometimes called dead). They carry no meaning; a few "
    "percent is normal, many mean the run has more features than the documents need.",
    "k (features per document)": "How many features describe each document. Larger k keeps more detail; smaller k "
    "gives each document fewer, broader concepts.",
    "epoch": "One pass of training over all documents.",
    "theme": "A broad subject of the collection, like a section of a newspaper or a clinic's specialty. A theme "
    "holds families and features; a document belongs to its strongest theme and to any other it is clearly about.",
    "family": "A general feature (the parent) with the more specific features that mostly fire where it fires "
    "(its children).",
    "τ (tau)": "How often a child must fire together with its parent to join its family: higher τ gives fewer, "
    "tighter families.",
    "label score": "How well a feature's label tells its documents apart from the others: 1.0 perfectly, 0.5 no "
    "better than chance (technically a ROC-AUC of label-to-document similarity).",
    "similarity": "How close two texts are in meaning, from 0 (unrelated) to 1 (the same), from their embeddings.",
    "lift": COMPARISON_WORDS["lift"],
    "q": COMPARISON_WORDS["q"],
    "95% range": COMPARISON_WORDS["range"],
    "trend": TREND_WORDS["trend"],
}


def term_title(term: str) -> str:
    """How a term heads its entry: a word capitalised ("Theme"), a symbol left as it is ("k", and "τ (tau)" never
    with a capital tau)."""
    first = term.split()[0]
    return term[0].upper() + term[1:] if first[0].isascii() and first[0].isalpha() and len(first) > 1 else term


def explain(*terms: str, label: str = "What do these words mean?") -> None:
    """A small popover defining the given glossary terms (for the few technical words a page must keep)."""
    with st.popover(label, icon=":material/help:"):
        for term in terms:
            st.markdown(f"**{term}**: {TERMS[term]}")
