// TenantBroker and TenantEvents: the shared publisher behind a job's Broker port, poll() behind its Events port.
#include "daemon/tenants/tenant_ports.hpp"

#include <poll.h>

#include <algorithm>

namespace outboxd::daemon::tenants {

core::Status TenantBroker::start() {
  router_.attach(route_, queue_);
  return {};
}

void TenantBroker::send(std::vector<core::OutboxMessage> rows, core::SteadyTime send_before) {
  for (auto& row : rows) {
    row.outbox = route_;
    row.outbox_name = name_;
  }
  publisher_.publish(std::move(rows), send_before);
}

Readiness TenantEvents::wait(int database_fd, std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {database_fd, POLLIN, 0}};
  const nfds_t count = database_fd >= 0 ? 2 : 1;
  const auto ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, kTick.count()));
  Readiness ready;
  if (poll(fds, count, ms) <= 0) return ready;
  ready.news = (fds[0].revents & POLLIN) != 0;
  ready.database = count == 2 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
  if (ready.news) wake_.clear();
  return ready;
}

}  // namespace outboxd::daemon::tenants
