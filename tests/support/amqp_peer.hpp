// An in-process AMQP 1.0 peer that misbehaves on request: the broker in the publisher's tests.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <proton/message.hpp>

namespace outboxd::test {

enum class PeerAction {
  accept,
  reject,   // with PeerDisposition::condition and description
  release,
  modify,   // delivery-failed and undeliverable-here set
  hold,     // never settle (until settle_held())
};

struct PeerDisposition {
  PeerAction action = PeerAction::accept;
  std::string condition = "amqp:internal-error";  // reject only
  std::string description;
};

struct ReceivedMessage {
  std::size_t index = 0;        // 0-based over the peer's lifetime
  std::size_t connection = 0;   // 1-based number of the connection it came on
  std::string link_name;
  std::string address;          // the link's target address
  std::string tag;              // delivery tag bytes
  std::vector<char> encoded;    // the message, re-encoded as Proton decoded it

  proton::message decode() const;
  std::string message_id() const;
};

struct PeerLink {
  std::size_t connection = 0;
  std::string name;
  std::string address;
  bool durable = false;         // target durability other than none
  std::vector<std::string> capabilities;
  bool closed = false;          // the client closed or detached it
};

// TLS for the peer: all its connections use it when cert_file is set.
struct PeerTls {
  std::string cert_file;       // PEM server certificate
  std::string key_file;
  std::string client_ca_file;  // set: require a client certificate from this CA and offer SASL EXTERNAL
};

// Listens on 127.0.0.1 on a free port, with a Proton container on a thread
// of its own; accepts SASL ANONYMOUS (and EXTERNAL with client
// certificates). Every setter may be called at any time from the test
// thread; settings apply to what happens afterwards.
class AmqpPeer {
 public:
  explicit AmqpPeer(PeerTls tls = {});
  ~AmqpPeer();
  AmqpPeer(const AmqpPeer&) = delete;
  AmqpPeer& operator=(const AmqpPeer&) = delete;

  std::string url() const;  // amqp:// or amqps://127.0.0.1:PORT
  int port() const;

  // Decides each delivery (default: accept). Runs on the peer's thread.
  void set_policy(std::function<PeerDisposition(const ReceivedMessage&)> policy);
  // Credit per new link: kept topped up to `window` (default 1000) ...
  void set_credit_window(int window);
  // ... or `initial` once and then only what grant_credit() adds.
  void set_manual_credit(int initial);
  void grant_credit(int credit);  // on every open link
  // Asks every open link to drain: the client must use or return its credit.
  void drain_links();
  std::size_t drains_finished() const;

  // After the next `deliveries` deliveries (counted from now, over all
  // connections), close the connection that carried the last one, leaving
  // it unsettled: with an AMQP close frame carrying `condition` (close) or by
  // dropping the socket without one (drop). Applies once.
  void close_connection_after(std::size_t deliveries, std::string condition = "amqp:connection:forced");
  void drop_connection_after(std::size_t deliveries);
  // Closes every open connection now (amqp:connection:forced).
  void close_connections();

  // Refuses links to `address`: attach, then detach with `condition`.
  void refuse_address(std::string address, std::string condition = "amqp:not-found");

  // Settles every held delivery with `disposition`.
  void settle_held(PeerDisposition disposition);

  std::vector<ReceivedMessage> received() const;
  std::size_t received_count() const;
  std::size_t held_count() const;
  std::vector<PeerLink> links() const;
  std::size_t connections_opened() const;
  std::size_t connections_open() const;
  // The authenticated user of each connection, in order ("anonymous" or the
  // client certificate's subject with EXTERNAL).
  std::vector<std::string> connection_users() const;

 private:
  class Handler;
  std::unique_ptr<Handler> handler_;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace outboxd::test
