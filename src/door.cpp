#include "door.h"

#include <type_traits>

#include "journal.h"

namespace tfb {

bool local_door::submit(const door_input& in, output& out, std::string& error) {
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
          state_.leave(i.c, i.how, i.now, out);
        else if constexpr (std::is_same_v<T, input::prune>)
          state_.prune(i.now, i.max_idle);
        else
          state_.shutdown(i.text, out);
      },
      in);
  if (out.journal.empty() || !journal_ || !journal_->is_open()) return true;
  return journal_->append(out.journal, error);
}

}  // namespace tfb
