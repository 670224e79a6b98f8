"""The articles the reader tests read back."""

import pandas as pd
import pytest


@pytest.fixture(scope="module")
def news(bbc: pd.DataFrame) -> pd.DataFrame:
    """50 BBC articles spread over all five labels."""
    return bbc.iloc[::44].head(50).reset_index(drop=True)
