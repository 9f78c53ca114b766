// Publisher over TLS to the in-process peer: CA file, host-name check, client certificate with EXTERNAL.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "amqp/publisher.hpp"
#include "amqp_peer.hpp"
#include "recording_sink.hpp"
#include "test_rows.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::Publisher;
using outboxd::core::DeliveryOutcome;
using namespace outboxd::test;

namespace {

// A throwaway PKI made with the openssl command: a CA, a server certificate
// for `server_names`, a client certificate, and a second, unrelated CA.
class Pki {
 public:
  explicit Pki(const std::string& server_names)
      : dir_(std::filesystem::temp_directory_path() /
             ("outboxd-tls-" + std::to_string(::getpid()) + "-" + std::to_string(++counter_))) {
    std::filesystem::create_directories(dir_);
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
        " -subj '/CN=outboxd test CA' -keyout ca.key -out ca.pem");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
        " -subj '/CN=another CA' -keyout other-ca.key -out other-ca.pem");
    issue("server", "/CN=outboxd test server", "subjectAltName=" + server_names);
    issue("client", "/CN=outboxd-client", "extendedKeyUsage=clientAuth");
  }
  ~Pki() { std::filesystem::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  void run(const std::string& command) const {
    const std::string line = "cd '" + dir_.string() + "' && " + command + " >/dev/null 2>&1";
    REQUIRE(std::system(line.c_str()) == 0);
  }
  void issue(const std::string& name, const std::string& subject, const std::string& extension) const {
    std::ofstream(dir_ / (name + ".ext")) << extension << "\n";
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj '" + subject + "' -keyout " +
        name + ".key -out " + name + ".csr");
    run("openssl x509 -req -in " + name + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile " + name +
        ".ext -out " + name + ".pem");
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
};

struct Attempt {
  std::vector<outboxd::amqp::Outcome> outcomes;
  std::vector<std::pair<bool, std::string>> events;
};

Attempt publish_one(const outboxd::config::BrokerConfig& broker) {
  RecordingSink sink;
  Publisher publisher(broker, "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 1));
  REQUIRE(sink.wait_for_outcomes(1));
  REQUIRE(sink.wait_for_connection_events(1));
  publisher.stop();
  return {sink.outcomes(), sink.connection_events()};
}

outboxd::config::BrokerConfig tls_broker(const AmqpPeer& peer, const Pki& pki, const std::string& host) {
  auto broker = peer_broker("amqps://" + host + ":" + std::to_string(peer.port()));
  broker.tls.enabled = true;
  broker.tls.ca_file = pki.file("ca.pem");
  return broker;
}

}  // namespace

TEST_CASE("TLS with the CA file and a matching host name", "[amqp][peer][tls]") {
  Pki pki("DNS:localhost,IP:127.0.0.1");
  AmqpPeer peer(PeerTls{pki.file("server.pem"), pki.file("server.key"), {}});
  CHECK(peer.url().starts_with("amqps://127.0.0.1:"));
  const auto attempt = publish_one(tls_broker(peer, pki, "localhost"));
  INFO(attempt.events.front().second);
  CHECK(attempt.outcomes.front().outcome == DeliveryOutcome::accepted);
  CHECK(attempt.events.front().first);
}

// Proton 0.37 checks the host name against DNS names only: connecting by IP
// address fails the check even when the certificate lists that IP address.
TEST_CASE("TLS host-name check by IP address fails even with an IP SAN (Proton 0.37)", "[amqp][peer][tls]") {
  Pki pki("DNS:localhost,IP:127.0.0.1");
  AmqpPeer peer(PeerTls{pki.file("server.pem"), pki.file("server.key"), {}});
  const auto attempt = publish_one(tls_broker(peer, pki, "127.0.0.1"));
  CHECK(attempt.outcomes.front().outcome == DeliveryOutcome::connection_lost);
  CHECK(attempt.events.front().second.find("certificate verify failed") != std::string::npos);
}

TEST_CASE("TLS refuses a certificate for another host unless verify_host is off", "[amqp][peer][tls]") {
  Pki pki("DNS:broker.example");
  AmqpPeer peer(PeerTls{pki.file("server.pem"), pki.file("server.key"), {}});
  auto broker = tls_broker(peer, pki, "127.0.0.1");

  const auto refused = publish_one(broker);
  CHECK(refused.outcomes.front().outcome == DeliveryOutcome::connection_lost);
  CHECK_FALSE(refused.events.front().first);
  CHECK_FALSE(refused.events.front().second.empty());
  CHECK(peer.received_count() == 0);

  broker.tls.verify_host = false;  // the chain is still checked
  const auto accepted = publish_one(broker);
  CHECK(accepted.outcomes.front().outcome == DeliveryOutcome::accepted);
}

TEST_CASE("TLS refuses a server certificate from an unknown CA", "[amqp][peer][tls]") {
  Pki pki("IP:127.0.0.1");
  AmqpPeer peer(PeerTls{pki.file("server.pem"), pki.file("server.key"), {}});
  auto broker = tls_broker(peer, pki, "127.0.0.1");
  broker.tls.ca_file = pki.file("other-ca.pem");
  broker.tls.verify_host = false;
  const auto refused = publish_one(broker);
  CHECK(refused.outcomes.front().outcome == DeliveryOutcome::connection_lost);
  CHECK_FALSE(refused.events.front().first);
  CHECK(peer.received_count() == 0);
}

TEST_CASE("SASL EXTERNAL with a client certificate", "[amqp][peer][tls]") {
  Pki pki("DNS:localhost");
  AmqpPeer peer(PeerTls{pki.file("server.pem"), pki.file("server.key"), pki.file("ca.pem")});
  auto broker = tls_broker(peer, pki, "localhost");
  broker.tls.cert_file = pki.file("client.pem");
  broker.tls.key_file = pki.file("client.key");
  broker.sasl_mechanisms = {"EXTERNAL"};
  const auto attempt = publish_one(broker);
  INFO(attempt.events.front().second);
  CHECK(attempt.outcomes.front().outcome == DeliveryOutcome::accepted);
  REQUIRE(peer.connection_users().size() == 1);
  CHECK(peer.connection_users().front().find("outboxd-client") != std::string::npos);
}
