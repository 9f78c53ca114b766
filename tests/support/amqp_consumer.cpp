// Blocking consumer used by the broker tests to read back what the publisher sent.
#include "amqp_consumer.hpp"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/session.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/symbol.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

namespace outboxd::test {
namespace {

class Consumer final : public proton::messaging_handler {
 public:
  explicit Consumer(const ConsumeRequest& request)
      : request_(request), deadline_(std::chrono::steady_clock::now() + request.timeout) {}

  Consumed result;

  void on_container_start(proton::container& container) override {
    proton::connection_options options;
    options.sasl_enabled(true).sasl_allow_insecure_mechs(true);
    if (request_.user.empty()) {
      options.sasl_allowed_mechs("ANONYMOUS");
    } else {
      options.sasl_allowed_mechs("PLAIN").user(request_.user).password(request_.password);
    }
    connection_ = container.connect(request_.url, options);
    proton::source_options source;
    if (request_.durable_source) source.durability_mode(proton::source::CONFIGURATION);
    if (!request_.source_capabilities.empty()) {
      source.capabilities(std::vector<proton::symbol>(request_.source_capabilities.begin(),
                                                      request_.source_capabilities.end()));
    }
    proton::receiver_options receiver;
    receiver.source(source).credit_window(static_cast<int>(std::min<std::size_t>(request_.count, 1000)));
    connection_.open_receiver(request_.address, receiver);
    tick(container);
  }

  void on_message(proton::delivery& delivery, proton::message& message) override {
    ReceivedMessage received;
    received.index = result.messages.size();
    received.connection = 1;
    received.link_name = delivery.receiver().name();
    received.address = request_.address;
    const auto tag = delivery.tag();
    received.tag.assign(tag.begin(), tag.end());
    message.encode(received.encoded);
    result.messages.push_back(std::move(received));
    delivery.accept();
    if (result.messages.size() >= request_.count) finish({});
  }

  void on_receiver_close(proton::receiver& receiver) override {
    finish("receiver closed: " + receiver.error().what());
  }
  void on_receiver_error(proton::receiver&) override {}
  void on_session_close(proton::session& session) override {
    finish("AMQP session ended: " + session.error().what());
  }
  void on_session_error(proton::session&) override {}
  void on_connection_error(proton::connection&) override {}
  void on_connection_close(proton::connection& connection) override {
    finish("connection closed: " + connection.error().what());
  }
  void on_transport_error(proton::transport& transport) override { finish(transport.error().what()); }
  void on_transport_close(proton::transport&) override { finish("connection lost"); }
  void on_error(const proton::error_condition& condition) override { finish(condition.what()); }

 private:
  // Short timer slices: a pending schedule() would keep container::run()
  // alive after the connection is closed.
  void tick(proton::container& container) {
    if (done_) return;
    if (std::chrono::steady_clock::now() >= deadline_) {
      return finish("timed out after " + std::to_string(result.messages.size()) + " of " +
                    std::to_string(request_.count) + " messages");
    }
    container.schedule(proton::duration(50), [this, &container] { tick(container); });
  }

  void finish(const std::string& error) {
    if (done_) return;
    done_ = true;
    if (result.error.empty()) result.error = error;
    if (!connection_) return;
    connection_.close();
    // From the timer (container-level work) the close frame would wait for
    // the connection's next event, a heartbeat maybe: wake it now.
    connection_.work_queue().add([] {});
  }

  const ConsumeRequest& request_;
  const std::chrono::steady_clock::time_point deadline_;
  proton::connection connection_;
  bool done_ = false;
};

}  // namespace

Consumed consume(const ConsumeRequest& request) {
  Consumer consumer(request);
  try {
    proton::container container(consumer);
    container.run();
  } catch (const std::exception& e) {
    if (consumer.result.error.empty()) consumer.result.error = e.what();
  }
  return std::move(consumer.result);
}

}  // namespace outboxd::test
