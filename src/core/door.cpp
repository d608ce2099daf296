#include "door.h"

#include <fmt/format.h>
#include <type_traits>

namespace tfb {

bool local_door::submit(const door_input& in, output& out, std::string& error) {
  out.journaled = journal_ && journal_->is_open();
  std::visit(
      [&](const auto& i) {
        using T = std::decay_t<decltype(i)>;
        if constexpr (std::is_same_v<T, input::arrive>)
          state_.arrive(i.c, i.req, i.peer, i.now, out);
        else if constexpr (std::is_same_v<T, input::decide>)
          state_.decide(i.c, i.req, i.peer, i.now, out);
        else if constexpr (std::is_same_v<T, input::abort>)
          state_.abort(i.c, i.req, i.now, out);
        else if constexpr (std::is_same_v<T, input::leave>)
          state_.leave(i.c, i.how, i.now, out, i.timed_out);
        else if constexpr (std::is_same_v<T, input::prune>)
          state_.prune(i.now, i.max_idle);
        else if constexpr (std::is_same_v<T, input::forget>)
          state_.forget(i.which, out);
        else if constexpr (std::is_same_v<T, input::expire>)
          state_.expire(i.which, i.now, out);
        else
          state_.shutdown(i.text, out);
      },
      in);
  if (out.journal.empty() || !journal_ || !journal_->is_open()) return true;
  if (!journal_->append(out.journal, error)) return false;
  // The journal is compacted at start and, as it grows, while the host runs.
  // A failed compaction leaves the old journal whole: worth a warning, not a stop.
  if (journal_->wants_compaction()) {
    std::string why;
    if (!journal_->compact(state_.snapshot(), why))
      out.events.push_back(ev::journal_not_compacted{journal_->path(), why});
  }
  return true;
}

}  // namespace tfb
