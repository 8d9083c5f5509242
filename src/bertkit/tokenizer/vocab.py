"""Google-format ``vocab.txt``: one token per line, the id is the 0-based line number."""

from __future__ import annotations

from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.fileio import atomic_write, read_lines

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class Vocab:
    """A WordPiece vocabulary: ``token -> id`` and ``id -> token``.

    Every vocabulary bertkit uses must hold the five special tokens of BERT.
    """

    def __init__(self, tokens: list[str], source: str = "<memory>"):
        self.tokens = list(tokens)
        self.token_to_id: dict[str, int] = {}
        for index, token in enumerate(self.tokens):
            if not token:
                raise DataFormatError(source, "empty token", index + 1)
            if token in self.token_to_id:
                first = self.token_to_id[token] + 1
                raise DataFormatError(
                    source, f"duplicate token {token!r} (first on line {first})", index + 1
                )
            self.token_to_id[token] = index
        if not self.tokens:
            raise DataFormatError(source, "the vocabulary is empty (one token per line expected)")
        missing = [t for t in SPECIAL_TOKENS if t not in self.token_to_id]
        if missing:
            raise DataFormatError(source, f"vocabulary lacks the special tokens {' '.join(missing)}")

    @classmethod
    def from_file(cls, path: str | Path) -> Vocab:
        """Read a ``vocab.txt``; bad files raise errors naming the file and line."""
        path = Path(path)
        if path.is_dir():
            path = path / "vocab.txt"
        tokens = [line.strip() for _, line in read_lines(path)]
        if tokens and tokens[0].startswith("\ufeff"):  # other tools read it as part of token 0
            raise DataFormatError(path, "starts with a byte order mark (U+FEFF), which would be read as part "
                                        "of the first token; save the file as UTF-8 without a BOM", 1)
        while tokens and not tokens[-1]:  # tolerate trailing blank lines only
            tokens.pop()
        return cls(tokens, source=str(path))

    def fingerprint(self) -> str:
        """SHA-256 of the token list in id order: equal exactly when every id means the same token
        (a copy, or another line ending, gives the same fingerprint; another order does not)."""
        import hashlib

        return hashlib.sha256("\n".join(self.tokens).encode("utf-8")).hexdigest()

    def save(self, path: str | Path) -> None:
        with atomic_write(path) as f:
            for token in self.tokens:
                f.write(token + "\n")

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.token_to_id

    def __getitem__(self, token: str) -> int:
        return self.token_to_id[token]
