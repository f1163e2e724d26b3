// The exact buffer-packing search of hetdeploy's memory planner (memory.fit), compiled by
// exact_packing.py with g++ and called through ctypes.
//
// Offsets for buffers with fixed lifetimes so that no two live at once share a byte and every one
// ends below a capacity: a depth-first search over canonical placements after MiniMalloc (Moffitt,
// "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated Machine Learning", ASPLOS
// 2023). Buffers are placed in non-decreasing order of offset, each at the lowest offset the placed
// buffers it is live with leave it. Time enters only through sections, the maximal sets of buffers
// live at one moment (a section closes when a buffer ends after another started), so the search
// and every key of its orders are the same however time is numbered.
//
// Pruning: per section, its floor (the top of what is placed there, raised to the least offset any
// of its unplaced buffers can still take, and to the offset just used) plus its unplaced bytes must
// fit the capacity; a candidate whose offset is at or above the top some other unplaced buffer
// could reach is skipped (that one goes first in another branch); when a placed buffer has nothing
// unplaced live beside it, no other choice at its node does better; a section whose unplaced bytes
// fill it from the lowest open offset to the capacity has one of them at that offset (if none can
// go there, a dead end; if one, the node's only choice). When no unplaced buffer spans a section
// boundary any more, the two sides are searched independently. Static orders take turns
// under a node limit that doubles each round; the total work is bounded by the caller's budget in
// nodes, never by time, so the same instance gives the same answer on every machine.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

enum class Outcome { found, none, out_of_nodes };

struct Candidate {
  int64_t offset;
  int rank;
  int buffer;
};

class Packer {
 public:
  Packer(int n, const int64_t* sizes, const int64_t* firsts, const int64_t* lasts, int64_t capacity)
      : n_(n), size_(sizes, sizes + n), capacity_(capacity), lo_(n), hi_(n), beside_(n),
        offset_(n, -1), solution_(n, -1), least_(n, 0) {
    Sweep(firsts, lasts);
  }

  // orders: the static orders' keys, e.g. "CAT,TAC" (see hetdeploy_exact_packing)
  Outcome Solve(const std::string& orders, int64_t budget) {
    std::vector<std::string> keys;
    for (size_t from = 0; from <= orders.size();) {
      const size_t comma = std::min(orders.find(',', from), orders.size());
      keys.push_back(orders.substr(from, comma - from));
      from = comma + 1;
    }
    int64_t limit = n_;
    while (budget > 0) {
      limit *= 2;
      for (const std::string& order : keys) {
        order_ = order.c_str();
        nodes_left_ = std::min(limit, budget);
        budget -= nodes_left_;
        const Outcome outcome = SolveAll();
        if (outcome != Outcome::out_of_nodes) return outcome;
        budget += nodes_left_;  // what this order did not use stays in the budget
        if (budget <= 0) break;
      }
    }
    return Outcome::out_of_nodes;
  }

  const std::vector<int64_t>& solution() const { return solution_; }

 private:
  // Sections: a sweep over start and end events (an end at t before a start at t: lifetimes are
  // whole steps, [first, last]); a section closes at an end when a buffer started since the last.
  void Sweep(const int64_t* firsts, const int64_t* lasts) {
    struct Event {
      int64_t time;
      int is_start;
      int buffer;
    };
    std::vector<Event> events;
    events.reserve(2 * n_);
    for (int i = 0; i < n_; ++i) {
      events.push_back({firsts[i], 1, i});
      events.push_back({lasts[i] + 1, 0, i});
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.is_start != b.is_start) return a.is_start < b.is_start;
      return a.buffer < b.buffer;
    });
    std::vector<int> live;
    bool grew = false;
    for (const Event& e : events) {
      if (e.is_start) {
        for (int other : live) {
          beside_[e.buffer].push_back(other);
          beside_[other].push_back(e.buffer);
        }
        live.push_back(e.buffer);
        lo_[e.buffer] = static_cast<int>(members_.size());
        grew = true;
        continue;
      }
      if (grew) {
        members_.push_back(live);
        grew = false;
      }
      hi_[e.buffer] = static_cast<int>(members_.size());
      live.erase(std::find(live.begin(), live.end(), e.buffer));
    }
    const int sections = static_cast<int>(members_.size());
    unplaced_bytes_.assign(sections, 0);
    floor_.assign(sections, 0);
    cuts_.assign(sections, 0);  // cuts_[s]: unplaced buffers live in sections s and s + 1
    unplaced_count_.assign(sections, 0);
    for (int s = 0; s < sections; ++s) unplaced_count_[s] = static_cast<int>(members_[s].size());
    position_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      for (int s = lo_[i]; s < hi_[i]; ++s) unplaced_bytes_[s] += size_[i];
      for (int s = lo_[i]; s + 1 < hi_[i]; ++s) ++cuts_[s];
      position_[i].resize(hi_[i] - lo_[i]);
    }
    for (int s = 0; s < sections; ++s) {
      for (size_t k = 0; k < members_[s].size(); ++k) position_[members_[s][k]][s - lo_[members_[s][k]]] = static_cast<int>(k);
    }
  }

  Outcome SolveAll() {
    std::fill(offset_.begin(), offset_.end(), -1);
    std::fill(least_.begin(), least_.end(), 0);
    std::fill(floor_.begin(), floor_.end(), 0);
    const int sections = static_cast<int>(members_.size());
    int start = 0;
    for (int s = 0; s < sections; ++s) {
      if (s + 1 < sections && cuts_[s] > 0) continue;
      const Outcome outcome = SolvePart(start, s + 1);
      if (outcome != Outcome::found) return outcome;
      start = s + 1;
    }
    return Outcome::found;
  }

  // The unplaced buffers live only in sections [start, end), ranked in the current order.
  Outcome SolvePart(int start, int end) {
    std::vector<int> part;
    for (int s = start; s < end; ++s) {
      for (int i : members_[s]) {
        if (offset_[i] < 0 && s == std::max(start, lo_[i])) part.push_back(i);  // once: in its first section here
      }
    }
    if (part.empty()) return Outcome::found;
    std::vector<int64_t> peak(part.size(), 0);
    for (size_t k = 0; k < part.size(); ++k) {
      for (int s = lo_[part[k]]; s < hi_[part[k]]; ++s) peak[k] = std::max(peak[k], unplaced_bytes_[s]);
    }
    auto key = [&](char c, size_t k) -> int64_t {
      const int i = part[k];
      switch (c) {
        case 'C': return hi_[i] - lo_[i];
        case 'A': return size_[i] * (hi_[i] - lo_[i]);
        case 'T': return peak[k];
        default: return -lo_[i];  // 'L'
      }
    };
    std::vector<size_t> ranked(part.size());
    for (size_t k = 0; k < ranked.size(); ++k) ranked[k] = k;
    std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
      for (const char* c = order_; *c; ++c) {
        const int64_t ka = key(*c, a), kb = key(*c, b);
        if (ka != kb) return ka > kb;
      }
      return part[a] < part[b];
    });
    std::vector<Candidate> candidates;
    candidates.reserve(part.size());
    for (size_t r = 0; r < ranked.size(); ++r) candidates.push_back({0, static_cast<int>(r), part[ranked[r]]});
    return Search(candidates, start, end, 0, -1);
  }

  Outcome Search(const std::vector<Candidate>& previous, int start, int end, int64_t last_offset, int last_rank) {
    if (nodes_left_ <= 0) return Outcome::out_of_nodes;
    --nodes_left_;
    std::vector<Candidate> candidates;
    candidates.reserve(previous.size());
    for (const Candidate& c : previous) {
      if (offset_[c.buffer] < 0) candidates.push_back({least_[c.buffer], c.rank, c.buffer});
    }
    if (candidates.empty()) return Outcome::found;
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.offset != b.offset ? a.offset < b.offset : a.rank < b.rank;
    });
    int64_t lowest_top = std::numeric_limits<int64_t>::max();
    for (const Candidate& c : candidates) lowest_top = std::min(lowest_top, c.offset + size_[c.buffer]);
    auto excluded = [&](const Candidate& c) {
      return c.offset < last_offset || (c.offset == last_offset && c.rank < last_rank);
    };
    const int forced = Forced(candidates, start, end, excluded);
    if (forced == kDead) return Outcome::none;
    for (const Candidate& c : candidates) {
      if (excluded(c)) continue;
      if (c.offset >= lowest_top) break;  // it would leave a gap another buffer fills: placed first elsewhere
      if (forced != kNone && c.buffer != forced) continue;
      const int i = c.buffer;
      const int64_t top = c.offset + size_[i];
      offset_[i] = c.offset;
      // the unplaced buffers beside it can start no lower than its top; where they live, a
      // section's floor is at least the least offset its unplaced buffers can take
      const size_t raised_from = raised_.size(), floors_from = floors_.size();
      bool alone = true;
      for (int j : beside_[i]) {
        if (offset_[j] >= 0) continue;
        alone = false;
        if (least_[j] >= top) continue;
        raised_.push_back({j, least_[j]});
        least_[j] = top;
      }
      for (int s = lo_[i]; s < hi_[i]; ++s) {
        floors_.push_back({s, floor_[s]});
        floor_[s] = top;
        unplaced_bytes_[s] -= size_[i];
        // out of the section's unplaced prefix: swapped with its last unplaced buffer
        std::vector<int>& members = members_[s];
        const int last = --unplaced_count_[s], here = position_[i][s - lo_[i]], other = members[last];
        std::swap(members[here], members[last]);
        position_[other][s - lo_[other]] = here;
        position_[i][s - lo_[i]] = last;
      }
      // the raised buffers all meet i, so the sections they live in are one range
      int from = hi_[i], to = lo_[i];
      for (size_t k = raised_from; k < raised_.size(); ++k) {
        from = std::min(from, lo_[raised_[k].buffer]);
        to = std::max(to, hi_[raised_[k].buffer]);
      }
      for (int s = from; s < to; ++s) RaiseFloor(s, c.offset);
      Outcome outcome = Outcome::none;
      if (Fits(start, end, c.offset)) {
        solution_[i] = c.offset;
        // a forced choice picked no rank among equals: the exclusions below it stay as they were
        const int rank = forced == kNone ? c.rank : c.offset == last_offset ? last_rank : -1;
        outcome = Continue(candidates, i, start, end, c.offset, rank);
      }
      while (floors_.size() > floors_from) {
        floor_[floors_.back().section] = floors_.back().floor;
        floors_.pop_back();
      }
      for (int s = lo_[i]; s < hi_[i]; ++s) {
        unplaced_bytes_[s] += size_[i];
        ++unplaced_count_[s];  // i is just past the prefix: back in it
      }
      while (raised_.size() > raised_from) {
        least_[raised_.back().buffer] = raised_.back().least;
        raised_.pop_back();
      }
      offset_[i] = -1;
      if (outcome != Outcome::none) return outcome;
      if (alone) break;  // placed with nothing unplaced beside it, and still no completion
    }
    return Outcome::none;
  }

  // A tight section, one whose unplaced bytes fill it from the lowest offset still open (the first
  // candidate not excluded) to the capacity, has one of its unplaced buffers at that offset in
  // every completion. Returns kDead when some tight section has no candidate there, the buffer to
  // place when one has exactly one (the node's only choice), else kNone.
  template <typename Excluded>
  int Forced(const std::vector<Candidate>& candidates, int start, int end, const Excluded& excluded) {
    auto open = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& c) { return !excluded(c); });
    if (open == candidates.end()) return kDead;
    const int64_t lowest = open->offset;
    auto tight = [&](int s) { return unplaced_count_[s] > 0 && lowest + unplaced_bytes_[s] >= capacity_; };
    int s = start;
    while (s < end && !tight(s)) ++s;
    if (s == end) return kNone;
    choices_.assign(end - start, 0);
    last_choice_.assign(end - start, kNone);
    for (auto c = open; c != candidates.end() && c->offset == lowest; ++c) {
      if (excluded(*c)) continue;
      for (int t = std::max(start, lo_[c->buffer]); t < std::min(end, hi_[c->buffer]); ++t) {
        ++choices_[t - start];
        last_choice_[t - start] = c->buffer;
      }
    }
    int forced = kNone;
    for (; s < end; ++s) {
      if (!tight(s)) continue;
      if (choices_[s - start] == 0) return kDead;
      if (choices_[s - start] == 1) forced = last_choice_[s - start];
    }
    return forced;
  }

  // A section's floor rises to the least offset its unplaced buffers can take. Only a rise above
  // its floor, the offset just used (every later offset is at or above it) and the capacity less
  // its unplaced bytes (which only fall further down) can prune, now or below this node: the scan
  // stops at the first buffer that rules that out.
  void RaiseFloor(int s, int64_t offset) {
    const int64_t bar = std::max({floor_[s], offset, capacity_ - unplaced_bytes_[s]});
    int64_t lowest = std::numeric_limits<int64_t>::max();
    for (int k = 0; k < unplaced_count_[s]; ++k) {
      const int j = members_[s][k];
      if (least_[j] <= bar) return;
      lowest = std::min(lowest, least_[j]);
    }
    if (lowest == std::numeric_limits<int64_t>::max()) return;
    floors_.push_back({s, floor_[s]});
    floor_[s] = lowest;
  }

  bool Fits(int start, int end, int64_t offset) const {
    for (int s = start; s < end; ++s) {
      if (std::max(floor_[s], offset) + unplaced_bytes_[s] > capacity_) return false;
    }
    return true;
  }

  // After placing i: split at the boundaries no unplaced buffer spans any more and search each
  // side on its own, else go on in this part.
  Outcome Continue(const std::vector<Candidate>& candidates, int i, int start, int end, int64_t offset, int rank) {
    std::vector<int> splits = {start};
    for (int s = lo_[i]; s + 1 < hi_[i]; ++s) {
      if (--cuts_[s] == 0) splits.push_back(s + 1);
    }
    Outcome outcome = Outcome::found;
    if (splits.size() == 1) {
      outcome = Search(candidates, start, end, offset, rank);
    } else {
      splits.push_back(end);
      for (size_t k = 0; k + 1 < splits.size() && outcome == Outcome::found; ++k) {
        outcome = SolvePart(splits[k], splits[k + 1]);
      }
    }
    for (int s = lo_[i]; s + 1 < hi_[i]; ++s) ++cuts_[s];
    return outcome;
  }

  struct LeastChange {
    int buffer;
    int64_t least;
  };
  struct FloorChange {
    int section;
    int64_t floor;
  };

  const int n_;
  const std::vector<int64_t> size_;
  const int64_t capacity_;
  std::vector<int> lo_, hi_;                // each buffer's sections [lo, hi)
  std::vector<std::vector<int>> beside_;    // the buffers live at a moment with it
  std::vector<std::vector<int>> members_;   // each section's buffers, the unplaced first
  std::vector<int> unplaced_count_;         // ... and how many of them are unplaced
  std::vector<std::vector<int>> position_;  // position_[i][s - lo_[i]]: where i is in members_[s]
  std::vector<int64_t> unplaced_bytes_, floor_;
  std::vector<int> cuts_;
  std::vector<int64_t> offset_, solution_, least_;
  std::vector<LeastChange> raised_;
  std::vector<FloorChange> floors_;
  static constexpr int kNone = -1, kDead = -2;
  std::vector<int> choices_, last_choice_;  // Forced's count of candidates per section, and one of them
  const char* order_ = "";
  int64_t nodes_left_ = 0;
};

}  // namespace

// Returns 1 with offsets[i] set for every buffer, 0 when no placement exists, -1 when the budget
// of nodes ran out first. Lifetimes are [firsts[i], lasts[i]] in any integer time. orders: the
// static orders to take turns with, comma-separated, each a string of keys compared in turn,
// largest first (ties to the buffer given first): C the sections it spans, A its bytes x sections,
// T the most unplaced bytes in one of its sections when its part's search starts, L its first
// section (earliest first).
extern "C" int hetdeploy_exact_packing(int64_t n, const int64_t* sizes, const int64_t* firsts, const int64_t* lasts,
                                       int64_t capacity, const char* orders, int64_t node_budget, int64_t* offsets) {
  if (n == 0) return 1;
  Packer packer(static_cast<int>(n), sizes, firsts, lasts, capacity);
  const Outcome outcome = packer.Solve(orders, node_budget);
  if (outcome == Outcome::found) std::copy(packer.solution().begin(), packer.solution().end(), offsets);
  return outcome == Outcome::found ? 1 : outcome == Outcome::none ? 0 : -1;
}
