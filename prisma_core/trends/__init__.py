"""Concepts over time (SPEC section 7): how common each concept is in each period of a date column, with 95% ranges,
and which concepts rise or fall beyond chance (`over_time`: a trend test over every period and a test between two
chosen periods, Benjamini-Hochberg over every test made); how dates become periods (`periods`); the settings of the
command line's `trends` (`config`). This module holds only what pages import cheaply: the thresholds and the words."""

PERIODS = ("day", "week", "month", "quarter", "year")
"""How dates can be grouped, finest first."""
MIN_PERIOD_DOCUMENTS = 10
"""A period with fewer documents is said to have too few: its shares are shown, with their wide ranges, but say
little on their own."""
MIN_CONCEPT_DOCUMENTS = 10
"""A concept is tested when at least this many dated documents hold it and at least this many lack it: with fewer,
no test can tell a trend from chance."""

RISING, FALLING, NO_CHANGE, TOO_FEW = "rising", "falling", "no change that holds", "too few documents to tell"
ROSE, FELL = "rose", "fell"

PLAIN_WORDS = {
    "trend": "Whether the concept becomes steadily more or less common from the first period to the last (a test "
    "for a trend: the Cochran-Armitage test, which asks whether the documents holding the concept lean towards "
    "later or earlier dates more than chance would make them). Rising or falling when it holds; the change shown is "
    "the straight line through the shares, from the first period to the last, in percentage points.",
    "change": "Whether the concept's share differs between the two periods compared (Fisher's exact test, or the "
    "chi-squared test where every count is large).",
    "q": "How likely a change is to be chance, once every test made at the same time is counted (both tests of "
    "every concept). A change holds when its q is below the threshold: of all the changes that hold at 0.05, at "
    "most about 1 in 20 is expected to be chance; with dates that mean nothing, at most 1 analysis in 20 finds "
    "any.",
    "too_few": f"Periods with fewer than {MIN_PERIOD_DOCUMENTS} documents: their shares are shown with their wide "
    "ranges but say little on their own. Concepts held by (or missing from) fewer than "
    f"{MIN_CONCEPT_DOCUMENTS} dated documents are not tested: too few documents to tell.",
}
"""The statistics in words an analyst reads (the app's help texts and the report's notes)."""
