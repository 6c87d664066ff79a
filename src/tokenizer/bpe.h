// The BPE merge loop, shared by the byte-level and SentencePiece-style tokenizers: a word is a
// list of symbols (token ids over byte spans of the word); pairs are merged best-first until no
// mergeable pair is left.
//
// Both orders run in O(n log n) per word with a doubly linked list of symbols and a lazy
// priority queue of candidate pairs (a popped candidate is re-checked against the current
// neighbours and dropped if stale), so a 100 KB SentencePiece "word" costs milliseconds, not the
// O(n^2) of rescanning the word after every merge.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace roofline {

struct BpeSymbol {
  int32_t id = -1;     // token id; -1 for a span with no token (score-based merging only)
  uint32_t begin = 0;  // byte span in the word
  uint32_t end = 0;
};

// Token text -> id, looked up by string_view without building a std::string.
class VocabIndex {
 public:
  void insert(std::string token, int32_t id) { map_.emplace(std::move(token), id); }
  int32_t find(std::string_view token) const {
    auto it = map_.find(token);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> map_;
};

class BpeMerges {
 public:
  // Rank order is insertion order; a repeated pair keeps its first (best) rank.
  void add(int32_t left, int32_t right, int32_t merged);
  bool empty() const { return map_.empty(); }

  // Merges by rank (lowest first; ties: leftmost), as Hugging Face's BPE model does. *symbols
  // is replaced by the merged symbols.
  void merge_by_rank(std::vector<BpeSymbol>* symbols) const;

 private:
  struct Entry {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, Entry> map_;
};

// llama.cpp's SentencePiece BPE for vocabularies with scores but no merges: repeatedly merge the
// adjacent pair whose concatenation is a token with the highest score (ties: leftmost). Symbols
// start as single characters; their id is filled in for those that end up as a vocabulary token
// and left -1 for the rest (the caller falls back to bytes).
void merge_by_score(std::string_view word, const VocabIndex& vocab,
                    const std::vector<float>& scores, std::vector<BpeSymbol>* symbols);

}  // namespace roofline
