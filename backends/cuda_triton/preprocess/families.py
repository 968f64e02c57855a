"""The op families the preprocess drafts into the blob (the partitioner delegates only these)."""

DRAFTED_FAMILIES: tuple[str, ...] = ("conv",)

__all__ = ["DRAFTED_FAMILIES"]
