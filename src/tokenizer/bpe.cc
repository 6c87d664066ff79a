// BPE merge loops (see bpe.h). Symbols live in a vector with prev/next links; a merge folds the
// right symbol into the left one and unlinks it, so positions stay stable and "leftmost" is the
// smaller index.
#include "tokenizer/bpe.h"

#include <queue>

namespace roofline {

namespace {

struct Node {
  BpeSymbol sym;
  int32_t prev;
  int32_t next;
  bool alive;
};

std::vector<Node> link(const std::vector<BpeSymbol>& symbols) {
  std::vector<Node> nodes(symbols.size());
  for (size_t i = 0; i < symbols.size(); ++i) {
    nodes[i] = {symbols[i], static_cast<int32_t>(i) - 1,
                i + 1 < symbols.size() ? static_cast<int32_t>(i + 1) : -1, true};
  }
  return nodes;
}

void unlink_into(const std::vector<Node>& nodes, std::vector<BpeSymbol>* symbols) {
  symbols->clear();
  for (const Node& n : nodes) {
    if (n.alive) symbols->push_back(n.sym);
  }
}

// Folds nodes[right] into nodes[left].
void fold(std::vector<Node>* nodes, int32_t left, int32_t right, int32_t merged_id) {
  Node& l = (*nodes)[left];
  Node& r = (*nodes)[right];
  l.sym.id = merged_id;
  l.sym.end = r.sym.end;
  l.next = r.next;
  if (r.next >= 0) (*nodes)[r.next].prev = left;
  r.alive = false;
}

}  // namespace

void BpeMerges::add(int32_t left, int32_t right, int32_t merged) {
  map_.emplace(key(left, right), Entry{static_cast<int32_t>(map_.size()), merged});
}

void BpeMerges::merge_by_rank(std::vector<BpeSymbol>* symbols) const {
  if (symbols->size() < 2) return;
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::vector<Node> nodes = link(*symbols);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = nodes[left].next;
    if (right < 0 || nodes[left].sym.id < 0 || nodes[right].sym.id < 0) return;
    auto it = map_.find(key(nodes[left].sym.id, nodes[right].sym.id));
    if (it != map_.end()) queue.push({it->second.rank, left, it->second.merged});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(nodes.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const Node& l = nodes[c.left];
    if (!l.alive || l.next < 0) continue;
    // Stale if either neighbour changed since the candidate was queued.
    auto it = map_.find(key(l.sym.id, nodes[l.next].sym.id));
    if (it == map_.end() || it->second.merged != c.merged) continue;
    fold(&nodes, c.left, l.next, c.merged);
    push(nodes[c.left].prev);
    push(c.left);
  }
  unlink_into(nodes, symbols);
}

void merge_by_score(std::string_view word, const VocabIndex& vocab,
                    const std::vector<float>& scores, std::vector<BpeSymbol>* symbols) {
  if (symbols->size() >= 2) {
    struct Candidate {
      float score;
      int32_t left;
      uint32_t size;  // byte length of the pair when queued: detects stale candidates
      int32_t merged;
      bool operator<(const Candidate& o) const {
        return score != o.score ? score < o.score : left > o.left;
      }
    };
    std::vector<Node> nodes = link(*symbols);
    std::priority_queue<Candidate> queue;
    auto push = [&](int32_t left) {
      if (left < 0) return;
      const int32_t right = nodes[left].next;
      if (right < 0) return;
      const uint32_t begin = nodes[left].sym.begin, end = nodes[right].sym.end;
      const int32_t id = vocab.find(word.substr(begin, end - begin));
      if (id < 0) return;
      const float score = static_cast<size_t>(id) < scores.size() ? scores[id] : 0.0f;
      queue.push({score, left, end - begin, id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(nodes.size()); ++i) push(i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      const Node& l = nodes[c.left];
      if (!l.alive || l.next < 0) continue;
      if (nodes[l.next].sym.end - l.sym.begin != c.size) continue;
      fold(&nodes, c.left, l.next, c.merged);
      push(nodes[c.left].prev);
      push(c.left);
    }
    unlink_into(nodes, symbols);
  }
  for (BpeSymbol& s : *symbols) {
    if (s.id < 0) s.id = vocab.find(word.substr(s.begin, s.end - s.begin));
  }
}

}  // namespace roofline
