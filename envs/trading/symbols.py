"""How exchanges spell a market, and the one spelling this platform uses: BASE-QUOTE in capitals (`BTC-USD`), which
names data files and conf keys. Files and exchanges write `BTCUSD`, `BTC/USD`, `XBTUSD` or `BTCUSDT`; they are compared
as markets (base and quote), not as strings, so an export of another coin is caught and the same coin spelled
otherwise is not refused."""
from __future__ import annotations

import re

from envs.errors import InputError

SYMBOL_FORM = re.compile(r"^[A-Z0-9]+-[A-Z0-9]+$")
# USD and the stablecoins quoted as USD: one quote when markets are compared, and what fetch takes for -USD
USD_QUOTES = ("USD", "USDT", "USDC", "FDUSD", "BUSD")
# Quotes an exchange writes right after the base (ETHUSD, BTCUSDT, ETHBTC), tried in this order (FDUSD before
# USD). BUSD and TUSD are not tried: they end like USD after a base ending in B or T (BNBUSD, DOTUSD).
QUOTES = ("FDUSD", "USDT", "USDC", "USD", "DAI", "EUR", "GBP", "JPY", "AUD", "CAD", "CHF", "TRY", "BTC", "XBT", "ETH")
# Kraken-style names of assets that other exchanges spell otherwise.
ASSET_ALIASES = {"XBT": "BTC", "XDG": "DOGE"}


def canonical_symbol(symbol: str) -> str:
    """Symbols name files (data/raw/BTC-USD_1h.parquet) and conf keys: BASE-QUOTE in capitals, or an error
    that suggests that form."""
    if SYMBOL_FORM.match(symbol):
        return symbol
    guess = re.sub(r"[/_: ]", "-", symbol.strip().upper())
    if "-" not in guess:
        guess = f"{guess}-USD"
    raise InputError(f"--symbol {symbol!r}: write symbols as BASE-QUOTE in capitals, e.g. --symbol {guess}")


def symbol_parts(symbol: str) -> tuple[str, str | None]:
    """BASE and QUOTE of a market however an exchange spells it (ETH-USD, ETH/USD, ETHUSD, XBTUSD), so spellings
    are compared, not strings. The quote is None when the text names an asset only (`ETH` of a `Volume ETH`
    column); USD and its stablecoins are one quote, as `fetch` takes BTC/USDT for BTC-USD."""
    text = symbol.strip().upper()
    parts = [part for part in re.split(r"[-/_: ]+", text) if part]
    if len(parts) >= 2:
        base, quote = parts[0], parts[1]
    else:
        joined = parts[0] if parts else text
        quote = next((q for q in QUOTES if joined.endswith(q) and len(joined) > len(q)), None)
        base = joined[:-len(quote)] if quote else joined
    if quote is not None:
        quote = "USD" if quote in USD_QUOTES else ASSET_ALIASES.get(quote, quote)
    return ASSET_ALIASES.get(base, base), quote


def same_symbol(first: str, second: str) -> bool:
    """Whether two spellings name one market; a bare asset (no quote) matches any market of that base."""
    (base, quote), (other_base, other_quote) = symbol_parts(first), symbol_parts(second)
    return base == other_base and (quote is None or other_quote is None or quote == other_quote)


def check_symbol(stated: str | None, expected: str, source: str, target: str = "expected", fix: str = "") -> None:
    """Refuse bars whose file states another market than `expected` (an InputError naming `source`, both
    symbols and `fix`): without it an export of ETH appends to a BTC history and exits 0. The same market spelled
    otherwise passes (`same_symbol`), and so does a file that states nothing. `target` is the words before
    `expected` in the message, naming what holds it ('data/raw/BTC-USD_1h.parquet holds', '--symbol is')."""
    if stated is None or same_symbol(stated, expected):
        return
    raise InputError(f"{source}: holds {stated} bars but {target} {expected}: "
                     f"{fix or f'use a file of {expected} bars'}")
