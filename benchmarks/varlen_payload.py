"""A variable-length payload for the benchmarks (issue 36): texts GENERATED from a stated length distribution, not a
corpus (no corpus ships in a package installed here).

Token lengths are log-normal: median `median` tokens, shape `sigma`, clipped to [`shortest`, `longest`] (defaults:
median 16, sigma 0.7, from 4 to 128 tokens: the median is an eighth of the maximum, a long right tail, like search
queries and short passages). Each text is that many minus 2 ([CLS] and [SEP]) whole words drawn uniformly, with a
fixed seed, from the packaged bert-uncased tokenizer's vocabulary (lower-case alphabetic entries of 3+ letters, each
one token), so each text tokenizes to exactly its drawn length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.load.payload import request_lengths, token_ids
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import PayloadSpec


@dataclass(frozen=True)
class LengthDistribution:
    count: int = 3000
    median: int = 16
    sigma: float = 0.7
    shortest: int = 4
    longest: int = 128
    seed: int = 36

    def describe(self) -> str:
        return (
            f"{self.count} texts generated from a log-normal token-length distribution (median {self.median}, "
            f"sigma {self.sigma:g}, clipped to {self.shortest}..{self.longest} tokens, seed {self.seed}), words drawn "
            "from the packaged bert-uncased vocabulary"
        )


def _words() -> list[str]:
    vocabulary = (minilm_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return [word for word in vocabulary if word.isascii() and word.isalpha() and word.islower() and len(word) >= 3]


def generated_texts(distribution: LengthDistribution) -> list[str]:
    rng = np.random.default_rng(distribution.seed)
    lengths = np.exp(rng.normal(np.log(distribution.median), distribution.sigma, distribution.count))
    lengths = np.clip(np.rint(lengths), distribution.shortest, distribution.longest).astype(int)
    words = _words()
    texts = [" ".join(rng.choice(words, size=int(n) - 2)) for n in lengths]
    assert all(len(token_ids(t, 512)) == n for t, n in zip(texts[:50], lengths[:50], strict=False))  # one per word
    return texts


def length_summary(payload: PayloadSpec) -> str:
    lengths = np.array(request_lengths(payload))
    p = np.percentile(lengths, [50, 90, 99])
    return (
        f"{len(lengths)} requests, tokens: min {lengths.min()}, median {p[0]:g}, p90 {p[1]:g}, p99 {p[2]:g}, "
        f"max {lengths.max()}, mean {lengths.mean():.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Write a generated payload as a JSONL payload file (one {"text": ...} a line), e.g. experiments/payloads/."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=LengthDistribution.count, help="Requests (default 3000).")
    parser.add_argument("--out", type=Path, required=True, help="The JSONL file to write.")
    args = parser.parse_args(argv)
    distribution = LengthDistribution(count=args.count)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps({"text": text}) + "\n" for text in generated_texts(distribution)))
    print(f"{args.out}: {distribution.describe()}; {length_summary(PayloadSpec(file=args.out.resolve()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
