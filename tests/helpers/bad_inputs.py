"""The files of the bad-input catalogue, shared by its core half (tests/reliability/test_reliability_inputs.py)
and its uploader half (test_reliability_uploader.py)."""

import io
import zipfile

import pypdf
from document_files import pdf_of_text

from prisma_core.ingest import Source

ARTICLE = "The central bank raised interest rates by a quarter point on Tuesday, citing rising prices."


def csv(rows: str, name: str = "table.csv", encoding: str = "utf-8") -> Source:
    return name, rows.encode(encoding)


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_of_text(ARTICLE)))
    writer.encrypt("secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def zip_bomb(unpacked_mb: int) -> bytes:
    """unpacked_mb megabytes of zeros, deflated to about a thousandth of that."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("zeros.txt", "w", force_zip64=True) as member,
    ):
        for _ in range(unpacked_mb):
            member.write(bytes(2**20))
    return buffer.getvalue()
