// Greedy buffer packing and its hill climb, for hetdeploy's memory planner (memory._greedy_search), compiled by
// packing.py with g++ (beside exact_packing.cpp) and called through ctypes: the climb runs greedy a thousand
// times a search, which took a third of planning a DenseNet-121 in Python.
//
// Greedy takes the buffers in a given order and puts each into the first pool it fits, at the start of the
// smallest gap between the buffers already placed there that are live at one of its steps, or above them all
// (best fit, TFLite's arena planner). The climb (as TVM's USMP does) swaps two places of the order, runs greedy
// again and keeps the result where its score is no worse, until the score reaches a goal or the given swaps run
// out. The score: with a bounded first pool, the bytes placed past it, then those in the last resort pool
// (DDR); else the first pool's end. Both parts only grow as greedy goes, so a run past the best's first part is
// given up at once (it could not be kept).

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace {

struct Score {
  int64_t beyond = 0, last_resort = 0;
  bool operator<=(const Score& other) const {
    return beyond < other.beyond || (beyond == other.beyond && last_resort <= other.last_resort);
  }
};

class Greedy {
 public:
  Greedy(int64_t n, const int64_t* sizes, const int64_t* firsts, const int64_t* lasts, int pools,
         const int64_t* capacities, int last_resort)
      : sizes_(sizes), firsts_(firsts), lasts_(lasts), capacities_(capacities, capacities + pools),
        last_resort_(last_resort), pool_(n), offset_(n) {
    for (int64_t i = 0; i < n; i++) steps_ = std::max<int64_t>(steps_, lasts[i] + 1);
  }

  // Greedy in ``order``; false when its score passes ``give_up_past`` in its first part (then pool() and
  // offset() are not a whole placement)
  bool Run(const std::vector<int64_t>& order, int64_t give_up_past) {
    const bool bounded = capacities_[0] >= 0;
    std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> live(
        capacities_.size(), std::vector<std::vector<std::pair<int64_t, int64_t>>>(steps_));
    score_ = Score();
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const int64_t i : order) {
      const int64_t size = sizes_[i], first = firsts_[i], last = lasts_[i];
      for (size_t k = 0; k < capacities_.size(); k++) {
        taken.clear();
        for (int64_t step = first; step <= last; step++)  // a buffer live at several steps comes more than once
          taken.insert(taken.end(), live[k][step].begin(), live[k][step].end());
        std::sort(taken.begin(), taken.end());
        int64_t offset = -1, best_gap = 0, cursor = 0;
        for (const auto& [start, end] : taken) {
          const int64_t gap = start - cursor;
          if (gap >= size && (offset < 0 || gap < best_gap)) offset = cursor, best_gap = gap;
          cursor = std::max(cursor, end);
        }
        if (offset < 0) offset = cursor;
        if (capacities_[k] >= 0 && offset + size > capacities_[k]) continue;
        pool_[i] = static_cast<int64_t>(k);
        offset_[i] = offset;
        for (int64_t step = first; step <= last; step++) live[k][step].emplace_back(offset, offset + size);
        if (!bounded) score_.beyond = std::max(score_.beyond, offset + size);
        else if (k > 0) score_.beyond += size;
        if (static_cast<int>(k) == last_resort_) score_.last_resort += size;
        break;
      }
      if (score_.beyond > give_up_past) return false;
    }
    return true;
  }

  const Score& score() const { return score_; }
  const std::vector<int64_t>& pool() const { return pool_; }
  const std::vector<int64_t>& offset() const { return offset_; }

 private:
  const int64_t *sizes_, *firsts_, *lasts_;
  const std::vector<int64_t> capacities_;
  const int last_resort_;
  int64_t steps_ = 0;
  std::vector<int64_t> pool_, offset_;
  Score score_;
};

}  // namespace

// Greedy's placement of n buffers live at steps [firsts[i], lasts[i]] (0 up, numbered densely) in ``order``
// into pools 0 .. pools - 1 (capacities[k] bytes; below zero: unbounded; the last one must be), then, while its
// score is above (goal_beyond, goal_last_resort), each of ``tries`` swaps of two places of the order (pairs[2 t],
// pairs[2 t + 1]) tried in turn, the best placement kept: its pools and offsets written, its score's two parts in
// score[0] and score[1]. last_resort: the pool whose bytes the score's second part counts (-1: none).
extern "C" void hetdeploy_greedy_climb(int64_t n, const int64_t* sizes, const int64_t* firsts, const int64_t* lasts,
                                       int64_t pools, const int64_t* capacities, int64_t last_resort,
                                       const int64_t* order, int64_t tries, const int64_t* pairs, int64_t goal_beyond,
                                       int64_t goal_last_resort, int64_t* pool, int64_t* offset, int64_t* score) {
  Greedy greedy(n, sizes, firsts, lasts, static_cast<int>(pools), capacities,
                static_cast<int>(last_resort));
  std::vector<int64_t> best_order(order, order + n);
  greedy.Run(best_order, INT64_MAX);
  Score best = greedy.score();
  std::vector<int64_t> best_pool = greedy.pool(), best_offset = greedy.offset();
  const Score goal = {goal_beyond, goal_last_resort};
  for (int64_t t = 0; t < tries && !(best <= goal); t++) {
    std::vector<int64_t> candidate = best_order;
    std::swap(candidate[pairs[2 * t]], candidate[pairs[2 * t + 1]]);
    if (!greedy.Run(candidate, best.beyond) || !(greedy.score() <= best)) continue;
    best_order.swap(candidate);
    best = greedy.score();
    best_pool = greedy.pool();
    best_offset = greedy.offset();
  }
  std::copy(best_pool.begin(), best_pool.end(), pool);
  std::copy(best_offset.begin(), best_offset.end(), offset);
  score[0] = best.beyond;
  score[1] = best.last_resort;
}
