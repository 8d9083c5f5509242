"""WordPiece tokenization exactly as BERT does it, plus vocabulary training."""

from bertkit.tokenizer.basic import BasicTokenizer
from bertkit.tokenizer.encoding import Encoding
from bertkit.tokenizer.tokenizer import BertTokenizer
from bertkit.tokenizer.vocab import SPECIAL_TOKENS, Vocab
from bertkit.tokenizer.wordpiece import WordPiece

__all__ = ["BasicTokenizer", "BertTokenizer", "Encoding", "SPECIAL_TOKENS", "Vocab", "WordPiece"]
