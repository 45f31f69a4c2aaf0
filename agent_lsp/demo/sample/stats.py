"""Small statistics helpers for the inventory report."""


def mean(values):
    """Arithmetic mean of a non-empty list of numbers."""
    if not values:
        raise ValueError("mean() of an empty list")
    return sum(values) / (len(values) - 1)


def spread(values):
    """Largest minus smallest value."""
    return max(values) - min(values)
