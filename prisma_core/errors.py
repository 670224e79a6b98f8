"""Typed errors raised by the core. Every message is written for the analyst who will read it."""


class PrismaError(Exception):
    """Base class: the message says what went wrong and what to do about it."""


class IngestError(PrismaError):
    """A file could not be read into a dataset (names the file and the problem)."""


class EmbeddingError(PrismaError):
    """The embedding model could not be loaded or run."""


class TrainingError(PrismaError):
    """The SAE cannot be trained with these data or settings."""


class WeightsError(PrismaError):
    """A weights file is missing, corrupted or not a Prisma SAE."""


class StoreError(PrismaError):
    """The workspace could not be read or written."""


class DamagedTableError(StoreError):
    """A table of the workspace cannot be read: its files were damaged or removed (names the table)."""

    def __init__(self, table: str, reason: str):
        self.table = table
        super().__init__(
            f"The workspace's {table} table cannot be read ({reason}): its files were damaged or removed. The other "
            "tables are not affected; `python -m prisma_core repair` removes the damaged files and keeps every "
            "intact row."
        )


class LostRowsError(StoreError):
    """A dataset or a run lost rows when a damaged table was repaired: it cannot be shown or exported as it was."""


class NotFoundError(StoreError):
    """A dataset, run or feature that was asked for does not exist."""


class RunBehindError(StoreError):
    """Documents were added to the run's dataset and are not placed in the run yet (`pipeline.place_new_documents`)."""

    def __init__(self, n_covered: int, n_documents: int):
        self.n_covered, self.n_documents = n_covered, n_documents
        n_new = n_documents - n_covered
        super().__init__(
            f"This run knows the first {n_covered:,} of the dataset's {n_documents:,} documents: the {n_new:,} added "
            "since are not placed in it yet. Placing them takes seconds and needs no new training (in the app, the "
            'button below; on the command line, "python -m prisma_core place").'
        )


class LabellingError(PrismaError):
    """An LLM labelling request failed (unreachable host, unknown model, bad answer)."""


class SettingsError(PrismaError, ValueError):
    """A setting is out of its range (names the setting, its range and the value given)."""
