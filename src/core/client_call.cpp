#include "client_call.h"

#include <variant>

namespace tfb::client {

using kind = call_result::kind;

call_result client_call::base(kind k) const {
  call_result r;
  r.k = k;
  r.name = c_.name;
  r.gen = gen_;
  r.addr = c_.addr;
  r.timeout = c_.timeout.value_or(duration(0));
  return r;
}

call_result client_call::interrupted(interrupt_signal sig, bool confirmed) const {
  call_result r = base(kind::interrupted);
  r.sig = sig;
  if (leave_on_interrupt_)
    r.how = confirmed ? call_result::interrupt_how::withdrew : call_result::interrupt_how::unconfirmed;
  else if (stands_) {
    r.how = call_result::interrupt_how::verdict_stands;
    r.v = stands_v_;
  }
  return r;
}

/// STATUS first, for the timeout's result; the host answers a LEAVE at once.
std::string client_call::withdrawal() const {
  std::string s = proto::format_request(proto::status_req{c_.scope, c_.name, true});
  if (c_.k == call_kind::wait) s += proto::format_request(proto::leave{"timeout"});
  return s;
}

void client_call::finish(call_result r, call_step& s) {
  if (done_) return;
  // Once interrupted, the call ends as interrupted whatever ends it (LEFT,
  // the release that came first, an error, a lost connection).
  if (interrupting_ && !(r.k == kind::interrupted && r.sig == interrupting_->sig)) r = *interrupting_;
  done_ = true;
  s.result = std::move(r);
}

call_step client_call::start() {
  call_step s;
  // wait: --timeout runs from when the arrival is sent, not from the host's
  // WAITING, which a host whose store does not answer never sends (issue #31
  // item 7). Until the arrival has gone out, connecting is --connect-timeout's.
  if (c_.k == call_kind::wait && c_.timeout) {
    armed_ = true;
    s.arm.emplace_back(call_timer::timeout, *c_.timeout);
  }
  return s;
}

call_step client_call::reply(const proto::reply& r, link_state, duration now) {
  call_step s;
  if (done_) return s;
  // LEFT answers an interrupted participant's LEAVE: only now may it say
  // that it withdrew (issue #31 item 5).
  if (interrupting_ && std::holds_alternative<proto::left>(r)) interrupting_ = interrupted(interrupting_->sig, true);
  switch (c_.k) {
    case call_kind::wait: wait_reply(r, s, now); break;
    case call_kind::decide: decide_reply(r, s); break;
    case call_kind::abort:
      if (auto* ab = std::get_if<proto::aborted>(&r)) {
        call_result res = base(kind::abort_done);
        res.name = ab->name;
        res.gen = ab->gen;
        res.delivered = ab->notified;
        finish(std::move(res), s);
      }
      break;
  }
  return s;
}

void client_call::wait_reply(const proto::reply& r, call_step& s, duration now) {
  if (auto* st = std::get_if<proto::status_reply>(&r)) {
    const proto::barrier_info* mine = nullptr;
    for (const auto& b : st->barriers)
      if (b.gen == gen_ && b.name == c_.name) mine = &b;
    if (firing_)
      last_ = mine ? std::optional(*mine) : std::nullopt;
    else if (mine && c_.progress_every)
      s.report = progress{c_.name, gen_, mine->arrived, mine->n, mine->missing, now,
                          mine->state == proto::round_state::gathered};
    return;
  }
  if (std::holds_alternative<proto::left>(r)) {
    if (!left_asked_) return;  // a LEFT that answers no LEAVE of ours says nothing
    call_result res = base(kind::timed_out);
    res.last = last_;
    finish(std::move(res), s);
    return;
  }
  if (auto* ah = std::get_if<proto::all_here>(&r); ah && c_.decide_by) {
    // ALLHERE again (a host restarted with its journal): the command runs once.
    if (!decide_started_) {
      decide_started_ = true;
      s.run_decide_by = *ah;
    } else if (!verdict_request_.empty()) {
      s.send = verdict_request_;
    }
    return;
  }
  if (c_.decide_by && std::holds_alternative<proto::decided>(r)) return;  // RELEASE follows
  if (auto* wt = std::get_if<proto::waiting>(&r)) {
    leave_on_interrupt_ = true;
    arrived(wt->gen, s);
    return;
  }
  if (auto* rel = std::get_if<proto::release>(&r)) {
    call_result res = base(kind::released);
    res.v = rel->v;
    if (interrupting_) {  // the release stands; this process was interrupted all the same
      res = *interrupting_;
      res.how = call_result::interrupt_how::released_first;
      res.name = rel->name;
      res.gen = rel->gen;
      res.v = rel->v;
    } else {
      res.message = rel->message;
    }
    finish(std::move(res), s);
    return;
  }
  if (std::holds_alternative<proto::all_here>(r)) return finish(base(kind::all_here), s);
  if (auto* ab = std::get_if<proto::aborted>(&r)) {
    call_result res = base(kind::aborted);
    res.name = ab->name;
    res.gen = ab->gen;
    res.message = ab->reason;
    finish(std::move(res), s);
  }
}

void client_call::arrived(std::uint64_t gen, call_step& s) {
  gen_ = gen;
  if (firing_) {  // came back after a reconnect while timing out: withdraw now
    left_asked_ = true;
    s.send += withdrawal();
    return;
  }
  if (!armed_ && c_.timeout) {  // it stood down before the arrival went out
    armed_ = true;
    s.arm.emplace_back(call_timer::timeout, *c_.timeout);
  }
  if (progressing_) return;
  progressing_ = true;
  if (c_.progress_every) s.arm.emplace_back(call_timer::progress, *c_.progress_every);
}

void client_call::decide_reply(const proto::reply& r, call_step& s) {
  if (auto* st = std::get_if<proto::status_reply>(&r)) {
    if (!firing_) return;
    call_result res = base(kind::decide_timed_out);
    res.v = c_.v;
    for (const auto& b : st->barriers)
      if (b.gen == gen_ && b.name == c_.name) {
        res.last = b;
        break;
      }
    return finish(std::move(res), s);
  }
  if (auto* dd = std::get_if<proto::decided>(&r)) {
    recorded rec{dd->v, dd->name, dd->gen, dd->arrived, dd->n};
    if (!c_.wait) {
      call_result res = base(kind::decide_recorded);
      res.rec = std::move(rec);
      return finish(std::move(res), s);
    }
    gen_ = dd->gen;
    c_.name = dd->name;
    stands_ = true;
    stands_v_ = dd->v;
    if (c_.note && !noting_) {
      noting_ = true;
      note_ = std::move(rec);
      s.arm.emplace_back(call_timer::note, note_after);
    }
    // The verdict is recorded (and journaled): a timeout ends only this wait
    // for delivery, and there is nothing to withdraw; STATUS gives its figures.
    if (c_.timeout && !armed_) {
      armed_ = true;
      s.arm.emplace_back(call_timer::timeout, *c_.timeout);
    }
    return;
  }
  if (auto* rel = std::get_if<proto::release>(&r)) {
    call_result res = base(kind::decide_delivered);
    res.v = rel->v;
    res.name = rel->name;
    res.gen = rel->gen;
    res.delivered = rel->delivered;
    return finish(std::move(res), s);
  }
  if (auto* ab = std::get_if<proto::aborted>(&r)) {
    call_result res = base(kind::aborted);
    res.name = ab->name;
    res.gen = ab->gen;
    res.message = ab->reason;
    finish(std::move(res), s);
  }
}

call_step client_call::timer(call_timer t, link_state l, duration) {
  call_step s;
  if (done_) return s;
  switch (t) {
    // Each only as armed: a timer the call did not ask for changes nothing.
    case call_timer::timeout:
      if (armed_) timeout_fired(l, s);
      break;
    case call_timer::progress:
      if (firing_ || !progressing_ || !c_.progress_every) break;  // the timeout's STATUS is the last
      s.send = proto::format_request(proto::status_req{c_.scope, c_.name, false});
      s.arm.emplace_back(call_timer::progress, *c_.progress_every);
      break;
    case call_timer::note:
      if (noting_) s.note = note_;
      break;
    case call_timer::interrupt:
      // A frozen host, or a dead link, must not hold an interrupted process for long.
      if (interrupting_) finish(*interrupting_, s);
      break;
  }
  return s;
}

/// Once --timeout passes: while reconnecting, end at once; else send the
/// withdrawal and give the host leave_grace to answer it (one frozen, or
/// behind a dead link, must not keep us past the timeout for long). For
/// wait, only LEFT says the participant is counted no more: the other ends
/// are `unconfirmed` (exit 75), never `timed_out` (issue #31 item 5).
void client_call::timeout_fired(link_state l, call_step& s) {
  bool wait = c_.k == call_kind::wait;
  if (firing_) {  // the grace passed without an answer
    call_result res = base(wait ? kind::unconfirmed : kind::decide_timed_out);
    res.why = call_result::no_left::unanswered;
    res.last = wait ? last_ : std::nullopt;
    res.v = c_.v;
    return finish(std::move(res), s);
  }
  firing_ = true;
  if (!l.can_send) {
    if (wait && !l.request_sent) {  // still connecting: --connect-timeout's; again from WAITING
      firing_ = armed_ = false;
      return;
    }
    call_result res = base(wait ? kind::unconfirmed : kind::decide_timed_out);
    res.why = call_result::no_left::reconnecting;
    res.reconnecting = !wait;
    res.last = wait ? last_ : std::nullopt;
    res.v = c_.v;
    return finish(std::move(res), s);
  }
  left_asked_ = wait;
  s.send = withdrawal();
  s.arm.emplace_back(call_timer::timeout, leave_grace);
}

call_step client_call::signal(interrupt_signal sig, link_state l) {
  call_step s;
  if (done_) return s;
  call_result o = interrupted(sig, false);
  if (interrupting_ || !leave_on_interrupt_ || !l.can_send) {
    finish(std::move(o), s);  // a second signal, or nothing to send: end now
    return s;
  }
  // Send LEAVE and end once the host has answered it, so that the host logs
  // a withdrawal, not a lost connection.
  interrupting_ = std::move(o);
  left_asked_ = true;
  s.send = proto::format_request(proto::leave{});
  s.arm.emplace_back(call_timer::interrupt, interrupt_grace);
  return s;
}

call_step client_call::lost() {
  call_step s;
  // The connection went with the withdrawal on its way: gone is gone.
  if (!done_ && interrupting_) finish(*interrupting_, s);
  return s;
}

call_step client_call::fail(tfb::error e) {
  call_step s;
  call_result r = base(kind::failed);
  r.failure = std::move(e);
  finish(std::move(r), s);
  return s;
}

call_step client_call::verdict_ready(std::string request) {
  call_step s;
  if (done_) return s;
  verdict_request_ = std::move(request);
  s.send = verdict_request_;
  return s;
}

}  // namespace tfb::client
