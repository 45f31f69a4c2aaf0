"""Images attached to a prompt (CONTRACT Decision 54): checked where the request arrives, sent as
data-URL parts of the prompt's user message, and counted and shown as placeholders everywhere
a message's text is read (token estimates, summaries, replays)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # decoded
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# What one image counts for in the context estimate: the order of a vision model's tile cost,
# never its base64 length (a 1 MB picture is not 350k tokens).
IMAGE_CHARS = 4_000


class ImageRefused(ValueError):
    """An image the run cannot take; the message names which and why (-32602 where asked)."""


@dataclass(frozen=True)
class ImagePart:
    mime_type: str
    data: str  # base64

    def to_part(self) -> dict[str, Any]:
        url = f"data:{self.mime_type};base64,{self.data}"
        return {"type": "image_url", "image_url": {"url": url}}


def checked_image(mime_type: Any, data: Any, index: int = 0) -> ImagePart:
    """The image if it is one of IMAGE_TYPES, valid base64 and at most MAX_IMAGE_BYTES decoded."""
    where = f"image {index + 1}"
    if mime_type not in IMAGE_TYPES:
        raise ImageRefused(
            f"{where}: type {mime_type!r} is not supported (use one of {', '.join(IMAGE_TYPES)})"
        )
    if not isinstance(data, str):
        raise ImageRefused(f"{where}: data must be a base64 string")
    if len(data) * 3 // 4 > MAX_IMAGE_BYTES + 3:
        raise ImageRefused(f"{where}: larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MB")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused(f"{where}: data is not valid base64") from None
    if not decoded:
        raise ImageRefused(f"{where}: empty")
    if len(decoded) > MAX_IMAGE_BYTES:
        raise ImageRefused(f"{where}: larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MB")
    return ImagePart(mime_type, data)


def user_content(text: str, images: list[ImagePart]) -> str | list[dict[str, Any]]:
    """A user message's content: the text alone, or the text then each image as a data URL."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *(image.to_part() for image in images)]


def is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def content_text(content: Any) -> str:
    """A message's content as text: its text parts, each image as `[image]`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            "[image]" if is_image(p) else str(p.get("text", ""))
            for p in content
            if isinstance(p, dict)
        )
    return "" if content is None else str(content)


def without_images(message: Any) -> Any:
    """The message with each image part's data left out (what sizes and summaries see)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not any(is_image(p) for p in content):
        return message
    return {**message, "content": content_text(content)}


def image_count(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else None
    return sum(1 for p in content if is_image(p)) if isinstance(content, list) else 0
