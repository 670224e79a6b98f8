"""Compare groups of documents (SPEC section 7): how common each concept is in each group, with the statistics that
say which differences hold (`prevalence`), and the concepts that best predict the groups on documents a model never
saw (`prediction`). This module holds only what pages import cheaply (no scipy or scikit-learn): the thresholds and
the statistics in words."""

CONFIDENCE = 0.95
"""How sure a range is: the true share lies in its 95% range 95 times in 100."""
MAX_Q = 0.05
"""A difference holds when its q is below this (the analyst can change it)."""
MIN_GROUP_SIZE = 10
"""A difference holds only in a group of at least this many documents: in a smaller group two or three documents
sharing a rare concept already give a tiny q, yet say little about documents like them."""

PLAIN_WORDS = {
    "range": "The range the share would likely fall in with other documents like these (a 95% range): the share "
    "measured here is one sample of what the group holds.",
    "q": "How likely a difference is to be chance, once every comparison made at the same time is counted. A "
    "difference holds when its q is below the threshold: of all the differences that hold at 0.05, at most about "
    "1 in 20 is expected to be chance. The others could be chance: too few documents to tell.",
    "lift": "How many times more common a concept is in a group than in the other documents.",
    "small": f"A group of fewer than {MIN_GROUP_SIZE} documents is compared too, but none of its differences holds: "
    "a few documents sharing a rare concept say little about documents like them.",
}
"""The statistics in words an analyst reads (the app's help texts and the report's notes)."""
