// The misbehaving AMQP peer: a Proton listener whose every delivery outcome is scripted by the test.
#include "amqp_peer.hpp"

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/transport.h>

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/ssl.hpp>
#include <proton/target.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

namespace outboxd::test {
namespace {

// Proton's C++ wrappers keep their C object behind a protected accessor; a
// member pointer formed in a derived class reaches it without casting.
struct DeliveryAccess : proton::delivery {
  static pn_delivery_t* get(const proton::delivery& d) {
    constexpr auto accessor = &DeliveryAccess::pn_object;
    return (d.*accessor)();
  }
};
struct ConnectionAccess : proton::connection {
  static pn_connection_t* get(const proton::connection& c) {
    constexpr auto accessor = &ConnectionAccess::pn_object;
    return (c.*accessor)();
  }
};

// proton::delivery::reject() cannot carry an error condition.
void reject_with_condition(const proton::delivery& delivery, const std::string& name, const std::string& text) {
  pn_delivery_t* d = DeliveryAccess::get(delivery);
  pn_condition_t* condition = pn_disposition_condition(pn_delivery_local(d));
  pn_condition_set_name(condition, name.c_str());
  pn_condition_set_description(condition, text.c_str());
  pn_delivery_update(d, PN_REJECTED);
  pn_delivery_settle(d);
}

// Ends the transport without an AMQP close frame: the client sees the socket go.
void drop(const proton::connection& connection) {
  pn_transport_t* transport = pn_connection_transport(ConnectionAccess::get(connection));
  pn_transport_close_tail(transport);
  pn_transport_close_head(transport);
}

enum class FaultKind { none, close, drop };

}  // namespace

proton::message ReceivedMessage::decode() const {
  proton::message message;
  message.decode(encoded);
  return message;
}

std::string ReceivedMessage::message_id() const { return proton::to_string(decode().id()); }

class AmqpPeer::Handler final : public proton::messaging_handler, public proton::listen_handler {
 public:
  explicit Handler(const PeerTls& tls)
      : tls_(!tls.cert_file.empty()), container_(*this, "outboxd-test-peer"), queue_(container_) {
    container_.server_connection_options(server_options(tls));
    listener_ = container_.listen("127.0.0.1:0", static_cast<proton::listen_handler&>(*this));
    thread_ = std::thread([this] { container_.run(); });
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return port_ != 0 || !listen_error_.empty(); });
    if (port_ == 0) {
      lock.unlock();
      container_.stop();
      thread_.join();
      throw std::runtime_error("test peer cannot listen: " + listen_error_);
    }
  }

  ~Handler() override {
    container_.stop();
    thread_.join();
  }

  static proton::connection_options server_options(const PeerTls& tls) {
    proton::connection_options options;
    options.sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
    if (tls.cert_file.empty()) return options;
    const proton::ssl_certificate certificate(tls.cert_file, tls.key_file);
    if (tls.client_ca_file.empty()) return options.ssl_server_options(proton::ssl_server_options(certificate));
    options.sasl_allowed_mechs("EXTERNAL ANONYMOUS");
    return options.ssl_server_options(
        proton::ssl_server_options(certificate, tls.client_ca_file, tls.client_ca_file, proton::ssl::VERIFY_PEER));
  }

  // Runs `work` on the peer thread and waits for it.
  void on_peer_thread(const std::function<void()>& work) {
    std::promise<void> done;
    auto finished = done.get_future();
    queue_.add([&] {
      work();
      // Container-level work: a connection writes what it changed only after
      // one of its own events, so give each one.
      for (auto& connection : open_connections_) connection.work_queue().add([] {});
      done.set_value();
    });
    finished.wait();
  }

  // listen_handler
  void on_open(proton::listener& listener) override {
    std::lock_guard lock(mutex_);
    port_ = listener.port();
    ready_.notify_all();
  }
  void on_error(proton::listener&, const std::string& what) override {
    std::lock_guard lock(mutex_);
    listen_error_ = what;
    ready_.notify_all();
  }

  // messaging_handler
  void on_connection_open(proton::connection& connection) override {
    connection.open();
    open_connections_.push_back(connection);
    std::lock_guard lock(mutex_);
    connection_numbers_[connection] = ++connections_opened_;
    ++connections_open_;
    connection_users_.push_back(connection.user());
  }

  void on_receiver_open(proton::receiver& receiver) override;
  void on_receiver_drain_finish(proton::receiver&) override {
    std::lock_guard lock(mutex_);
    ++drains_finished_;
  }
  void on_receiver_close(proton::receiver& receiver) override { mark_closed(receiver); }
  void on_receiver_detach(proton::receiver& receiver) override { mark_closed(receiver); }
  void on_message(proton::delivery& delivery, proton::message& message) override;

  void on_transport_close(proton::transport& transport) override {
    const auto connection = transport.connection();
    std::erase(open_connections_, connection);
    std::erase_if(receivers_, [&](const proton::receiver& r) { return r.connection() == connection; });
    std::erase_if(held_, [&](const proton::delivery& d) { return d.connection() == connection; });
    std::lock_guard lock(mutex_);
    held_count_ = held_.size();
    if (connection_numbers_.erase(connection) > 0) --connections_open_;
  }

  // A test peer sees clients vanish on purpose: none of this may throw.
  void on_transport_error(proton::transport&) override {}
  void on_connection_error(proton::connection&) override {}
  void on_session_error(proton::session&) override {}
  void on_receiver_error(proton::receiver&) override {}
  void on_sender_error(proton::sender&) override {}
  void on_error(const proton::error_condition&) override {}

  void settle(const proton::delivery& delivery, const PeerDisposition& disposition);
  void close_connections() {
    for (auto& connection : open_connections_) {
      connection.close(proton::error_condition("amqp:connection:forced", "closed by the test peer"));
    }
  }
  void grant_credit(int credit) {
    for (auto& receiver : receivers_) receiver.add_credit(static_cast<std::uint32_t>(credit));
  }
  void drain_links() {
    for (auto& receiver : receivers_) receiver.drain();
  }
  void settle_held(const PeerDisposition& disposition) {
    auto held = std::move(held_);
    held_.clear();
    for (auto& delivery : held) settle(delivery, disposition);
    std::lock_guard lock(mutex_);
    held_count_ = 0;
  }

  void mark_closed(const proton::receiver& receiver) {
    std::lock_guard lock(mutex_);
    const auto number = connection_numbers_[receiver.connection()];
    for (auto& link : links_) {
      if (link.connection == number && link.name == receiver.name()) link.closed = true;
    }
  }

  const bool tls_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  int port_ = 0;
  std::string listen_error_;
  // Settings, guarded by mutex_.
  std::function<PeerDisposition(const ReceivedMessage&)> policy_;
  int credit_window_ = 1000;
  int manual_credit_ = -1;  // >= 0: manual credit mode
  FaultKind fault_ = FaultKind::none;
  std::size_t fault_after_ = 0;
  std::string fault_condition_;
  std::map<std::string, std::string> refused_;
  // Observations, guarded by mutex_.
  std::vector<ReceivedMessage> received_;
  std::vector<PeerLink> links_;
  std::map<proton::connection, std::size_t> connection_numbers_;
  std::size_t connections_opened_ = 0;
  std::size_t connections_open_ = 0;
  std::vector<std::string> connection_users_;
  std::size_t held_count_ = 0;
  std::size_t drains_finished_ = 0;
  // Peer thread only.
  std::vector<proton::connection> open_connections_;
  std::vector<proton::receiver> receivers_;
  std::vector<proton::delivery> held_;

  proton::container container_;
  proton::work_queue queue_;
  proton::listener listener_;
  std::thread thread_;
};

void AmqpPeer::Handler::on_receiver_open(proton::receiver& receiver) {
  auto target = receiver.target();
  PeerLink link;
  link.name = receiver.name();
  link.address = target.address();
  link.durable = target.durability_mode() != proton::target::NONDURABLE;
  for (const auto& capability : target.capabilities()) link.capabilities.push_back(capability);
  std::string refusal;
  int window = 0;
  int manual = -1;
  {
    std::lock_guard lock(mutex_);
    link.connection = connection_numbers_[receiver.connection()];
    if (auto found = refused_.find(link.address); found != refused_.end()) refusal = found->second;
    window = credit_window_;
    manual = manual_credit_;
    link.closed = !refusal.empty();
    links_.push_back(link);
  }
  proton::receiver_options options;
  options.auto_accept(false).credit_window(manual >= 0 ? 0 : window);
  receiver.open(options);
  if (!refusal.empty()) {
    receiver.close(proton::error_condition(refusal, "refused by the test peer: " + link.address));
    return;
  }
  if (manual > 0) receiver.add_credit(static_cast<std::uint32_t>(manual));
  receivers_.push_back(receiver);
}

void AmqpPeer::Handler::on_message(proton::delivery& delivery, proton::message& message) {
  ReceivedMessage received;
  received.link_name = delivery.receiver().name();
  received.address = delivery.receiver().target().address();
  const auto tag = delivery.tag();
  received.tag.assign(tag.begin(), tag.end());
  message.encode(received.encoded);

  std::function<PeerDisposition(const ReceivedMessage&)> policy;
  FaultKind fault = FaultKind::none;
  std::string condition;
  {
    std::lock_guard lock(mutex_);
    received.index = received_.size();
    received.connection = connection_numbers_[delivery.connection()];
    received_.push_back(received);
    policy = policy_;
    if (fault_ != FaultKind::none && --fault_after_ == 0) {
      std::swap(fault, fault_);
      condition = fault_condition_;
    }
  }
  if (fault == FaultKind::close) {
    delivery.connection().close(proton::error_condition(condition, "closed by the test peer"));
    return;
  }
  if (fault == FaultKind::drop) return drop(delivery.connection());
  settle(delivery, policy ? policy(received) : PeerDisposition{});
}

void AmqpPeer::Handler::settle(const proton::delivery& delivery, const PeerDisposition& disposition) {
  proton::delivery d = delivery;
  switch (disposition.action) {
    case PeerAction::accept: d.accept(); return;
    case PeerAction::reject: return reject_with_condition(d, disposition.condition, disposition.description);
    case PeerAction::release: d.release(); return;
    case PeerAction::modify: d.modify(); return;
    case PeerAction::hold: {
      held_.push_back(d);
      std::lock_guard lock(mutex_);
      held_count_ = held_.size();
      return;
    }
  }
}

AmqpPeer::AmqpPeer(PeerTls tls) : handler_(std::make_unique<Handler>(tls)) {}
AmqpPeer::~AmqpPeer() = default;

std::string AmqpPeer::url() const {
  return (handler_->tls_ ? "amqps://127.0.0.1:" : "amqp://127.0.0.1:") + std::to_string(port());
}

int AmqpPeer::port() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->port_;
}

void AmqpPeer::set_policy(std::function<PeerDisposition(const ReceivedMessage&)> policy) {
  std::lock_guard lock(handler_->mutex_);
  handler_->policy_ = std::move(policy);
}

void AmqpPeer::set_credit_window(int window) {
  std::lock_guard lock(handler_->mutex_);
  handler_->credit_window_ = window;
  handler_->manual_credit_ = -1;
}

void AmqpPeer::set_manual_credit(int initial) {
  std::lock_guard lock(handler_->mutex_);
  handler_->manual_credit_ = initial;
}

void AmqpPeer::grant_credit(int credit) {
  handler_->on_peer_thread([&] { handler_->grant_credit(credit); });
}

void AmqpPeer::drain_links() {
  handler_->on_peer_thread([&] { handler_->drain_links(); });
}

std::size_t AmqpPeer::drains_finished() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->drains_finished_;
}

void AmqpPeer::close_connection_after(std::size_t deliveries, std::string condition) {
  std::lock_guard lock(handler_->mutex_);
  handler_->fault_ = deliveries > 0 ? FaultKind::close : FaultKind::none;
  handler_->fault_after_ = deliveries;
  handler_->fault_condition_ = std::move(condition);
}

void AmqpPeer::drop_connection_after(std::size_t deliveries) {
  std::lock_guard lock(handler_->mutex_);
  handler_->fault_ = deliveries > 0 ? FaultKind::drop : FaultKind::none;
  handler_->fault_after_ = deliveries;
}

void AmqpPeer::close_connections() {
  handler_->on_peer_thread([&] { handler_->close_connections(); });
}

void AmqpPeer::refuse_address(std::string address, std::string condition) {
  std::lock_guard lock(handler_->mutex_);
  handler_->refused_[std::move(address)] = std::move(condition);
}

void AmqpPeer::settle_held(PeerDisposition disposition) {
  handler_->on_peer_thread([&] { handler_->settle_held(disposition); });
}

std::vector<ReceivedMessage> AmqpPeer::received() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->received_;
}

std::size_t AmqpPeer::received_count() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->received_.size();
}

std::size_t AmqpPeer::held_count() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->held_count_;
}

std::vector<PeerLink> AmqpPeer::links() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->links_;
}

std::size_t AmqpPeer::connections_opened() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->connections_opened_;
}

std::size_t AmqpPeer::connections_open() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->connections_open_;
}

std::vector<std::string> AmqpPeer::connection_users() const {
  std::lock_guard lock(handler_->mutex_);
  return handler_->connection_users_;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace outboxd::test
