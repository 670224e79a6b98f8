"""Help texts of the settings forms, written for an analyst. The config dataclasses' field docstrings stay the
precise reference for the command line (`python -m prisma_core train --help`); these say what a setting changes
for the user. A test checks that every field the forms show has one."""

from __future__ import annotations

SAE_HELP = {
    "expansion_factor": "How many features the model may learn, as a multiple of the embedding size (384 for the "
    "default model): 8 gives 3,072. More features give finer concepts but need more documents; with few documents, "
    "a lower value avoids overfitting.",
    "k": "How many features describe each document. Larger keeps more detail of each document; smaller gives fewer, "
    "broader concepts per document.",
    "epochs": "How many times training goes through all documents. Too many on a small dataset makes the model "
    "memorise its documents (overfitting).",
    "batch_size": "How many documents the model looks at per training step. The default suits most datasets.",
    "lr": "How big each training step is. Leave it on auto unless training is unstable (then lower it).",
    "seed": "Any number. The same number, documents and settings give exactly the same result.",
    "k_aux": "Features that have stopped firing get a second chance: this many of them are trained on what the "
    "others miss. Auto is twice k.",
    "aux_alpha": "How much weight that second chance gets. 0 turns it off (more features then never fire).",
    "dead_after": "After how many documents without firing a feature counts as never firing and gets the second "
    "chance. Auto is about one pass over the documents.",
    "holdout_fraction": "The share of documents kept aside to check how well the model describes documents it has "
    "not seen. 0 trains on everything but measures nothing.",
    "grad_clip": "A safety limit on the size of a training step. The default rarely needs changing.",
    "device": "Where training runs: auto picks a GPU when there is one, else the CPU.",
}
FAMILY_HELP = {
    "tau": "How often a child feature must fire together with its parent to join its family, from 0 to 1. Higher "
    "gives fewer, tighter families; lower gives larger, looser ones.",
    "iterations": "Rounds of family building. After each round the parents found are set aside and families are "
    "looked for again among the other features, which finds finer families.",
    "min_family_size": "The smallest family shown, parent included: 2 means a parent with at least one child.",
}
EMBED_HELP = {
    "model": "The language model that turns each document into numbers. The bundled all-MiniLM-L6-v2 works offline; "
    "any sentence-transformers model name or local folder can be typed instead.",
    "batch_size": "How many text pieces are processed at once. Lower it if the app runs out of memory.",
    "normalize": "Give every document vector the same length, so only its direction (its meaning) counts.",
    "precision": "Number precision. Auto uses the faster bf16 where the processor supports it, with practically "
    "the same results.",
    "device": "Where the model runs: auto picks a GPU when there is one, else the CPU.",
    "backend": "The software that runs the model. Auto picks the fastest available; choose torch if the fast path "
    "causes trouble.",
}
