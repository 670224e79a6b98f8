"""Where a workspace lives: a local folder or a prefix in an S3-compatible object store, and the files there.

Tables go through LanceDB (`lance_options`); every other file (run weights, owner notes, the maintenance note) goes
through pyarrow.fs as a `Location`, so one code path serves a local disk and an object store. The object store's
settings come from the storage options given (e.g. the app's secrets) over the environment (AWS_ACCESS_KEY_ID, ...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from prisma_core.errors import StoreError

OBJECT_STORE_SCHEME = "s3://"
_SETTINGS = {
    "access_key_id": ("aws_access_key_id", "access_key_id"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token"),
    "endpoint": ("aws_endpoint_url_s3", "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
    "region": ("aws_region", "aws_default_region", "region"),
    "allow_http": ("aws_allow_http", "allow_http"),
}
"""Each setting and the names it may be given under, first name first: in storage options any of them, in any case;
in the environment the AWS_ ones, in upper case."""
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
TIMEOUT_S = 10.0
"""Seconds to wait for the object store to connect or answer before reporting it unreachable."""


def is_object_store(uri: str | Path) -> bool:
    return str(uri).startswith(OBJECT_STORE_SCHEME)


@dataclass(frozen=True)
class S3Settings:
    """How to reach an S3-compatible object store; empty fields are left to the AWS defaults."""

    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    endpoint: str | None = None
    region: str | None = None
    allow_http: bool = False

    @classmethod
    def resolve(cls, storage_options: Mapping[str, Any] | None = None) -> S3Settings:
        """The storage options given (e.g. the app's secrets) over the environment's AWS_* variables."""
        given = {str(key).lower(): value for key, value in (storage_options or {}).items() if value not in (None, "")}
        values: dict[str, Any] = {}
        for setting, names in _SETTINGS.items():
            found = [given[name] for name in names if name in given]
            found += [
                os.environ[name.upper()] for name in names if name.startswith("aws_") and os.environ.get(name.upper())
            ]
            values[setting] = found[0] if found else None
        allow_http = str(values.pop("allow_http") or "").lower() in ("1", "true", "yes")
        settings = cls(**values, allow_http=allow_http)
        settings.check()
        return settings

    def check(self) -> None:
        """Keys come in pairs; plain http would send them unencrypted, so it is only used for this machine's own
        server, or when asked for (AWS_ALLOW_HTTP=true)."""
        if bool(self.access_key_id) != bool(self.secret_access_key):
            missing = "AWS_SECRET_ACCESS_KEY" if self.access_key_id else "AWS_ACCESS_KEY_ID"
            raise StoreError(f"The object store's keys are incomplete: {missing} is not set.")
        if not self.endpoint:
            return
        url = urlparse(self.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StoreError(f"The object store address {self.endpoint!r} is not a URL such as https://host:port.")
        if url.scheme == "http" and url.hostname not in _LOOPBACK and not self.allow_http:
            raise StoreError(
                f"The object store address {self.endpoint} uses plain http, which would send the keys unencrypted. "
                "Use https, or set AWS_ALLOW_HTTP=true if the network is private."
            )

    @property
    def plain_http(self) -> bool:
        return bool(self.endpoint) and urlparse(self.endpoint).scheme == "http"

    @property
    def region_or_default(self) -> str | None:
        """An S3-compatible store needs some region (most ignore which); AWS's default is us-east-1."""
        return self.region or ("us-east-1" if self.endpoint else None)

    def lance_options(self) -> dict[str, str]:
        """LanceDB's storage options for these settings."""
        options = {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
            "aws_endpoint": self.endpoint,
            "aws_region": self.region_or_default,
            "allow_http": "true" if self.plain_http else None,
            "connect_timeout": f"{TIMEOUT_S:g}s",
        }
        return {key: value for key, value in options.items() if value}

    def filesystem(self) -> pafs.S3FileSystem:
        endpoint = urlparse(self.endpoint) if self.endpoint else None
        return pafs.S3FileSystem(
            access_key=self.access_key_id,
            secret_key=self.secret_access_key,
            session_token=self.session_token,
            region=self.region_or_default,
            endpoint_override=endpoint.netloc if endpoint else None,
            scheme=endpoint.scheme if endpoint else "https",
            connect_timeout=TIMEOUT_S,
            request_timeout=TIMEOUT_S,
        )


@dataclass(frozen=True)
class Location:
    """A file or folder on a local disk (`uri` is its absolute path) or in an object store (`uri` is s3://...),
    reached through pyarrow.fs. `path` is its path inside `fs`."""

    fs: pafs.FileSystem
    path: str
    uri: str

    @classmethod
    def of(cls, where: str | Path | Location, settings: S3Settings | None = None) -> Location:
        """The location a local path or an s3:// URI names (the object store reached with `settings`, else with the
        environment's)."""
        if isinstance(where, Location):
            return where
        if not is_object_store(where):
            if "://" in str(where):
                raise StoreError(f"{where} is neither a local folder nor an s3:// address.")
            local = Path(where).expanduser().resolve()
            return cls(pafs.LocalFileSystem(), local.as_posix(), str(local))
        key = str(where).removeprefix(OBJECT_STORE_SCHEME).strip("/")
        if not key:
            raise StoreError(f"{where} names no bucket: use s3://bucket or s3://bucket/folder.")
        return cls((settings or S3Settings.resolve()).filesystem(), key, OBJECT_STORE_SCHEME + key)

    def __truediv__(self, name: str) -> Location:
        separator = os.sep if self.is_local else "/"
        return Location(self.fs, f"{self.path}/{name}", f"{self.uri.rstrip(separator)}{separator}{name}")

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        """A local location is a path-like object (`Path(location)`); one in an object store is not."""
        if not self.is_local:
            raise TypeError(f"{self.uri} is in an object store, not on a local disk")
        return self.uri

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        """The object store's bucket (the first part of the path); "" on a local disk."""
        return "" if self.is_local else self.path.split("/", 1)[0]

    def _info(self) -> pafs.FileInfo:
        return self.fs.get_file_info(self.path)

    def is_file(self) -> bool:
        return self._info().type == pafs.FileType.File

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path) as stream:
            return stream.read()

    def write_bytes(self, data: bytes) -> None:
        """An object store replaces the object whole; a local file is written in place (as `Path.write_bytes`)."""
        with self.fs.open_output_stream(self.path) as stream:
            stream.write(data)

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8")

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def make_folder(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def folders(self) -> list[Location]:
        """The folders directly inside this one (none when it does not exist)."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return [self / info.base_name for info in infos if info.type == pafs.FileType.Directory]

    def modified(self) -> float | None:
        """When it last changed (seconds since the epoch): a folder in an object store has no time of its own, so
        its newest file's is used; None when nothing is there."""
        info = self._info()
        if info.mtime is not None:
            return info.mtime.timestamp()
        if info.type != pafs.FileType.Directory:
            return None
        inside = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True))
        times = [item.mtime.timestamp() for item in inside if item.mtime is not None]
        return max(times) if times else None

    def remove(self) -> None:
        """Removes the folder and everything in it; nothing happens when it is not there."""
        if self._info().type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path)
