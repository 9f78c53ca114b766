// A JMS application (Apache Qpid JMS) reading outboxd's messages from Artemis; prints what it sees as JSON lines.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * Usage (broker from OUTBOXD_TEST_ARTEMIS_URL, _USER, _PASSWORD):
 *   fields QUEUE COUNT                  every JMS field of COUNT messages, one line each
 *   group QUEUE NAME [CLOSE_AFTER HOLD] one line per delivery until stdin closes; with CLOSE_AFTER,
 *                                       closes after acknowledging that many and receiving HOLD more
 *                                       unacknowledged (the broker redelivers those to the others)
 */
public final class OutboxConsumer {
  private OutboxConsumer() {}

  public static void main(String[] args) throws Exception {
    String url = System.getenv("OUTBOXD_TEST_ARTEMIS_URL");
    // A small prefetch, as competing consumers use: a consumer that closes hands back little it never saw.
    JmsConnectionFactory factory = new JmsConnectionFactory(
        System.getenv("OUTBOXD_TEST_ARTEMIS_USER"), System.getenv("OUTBOXD_TEST_ARTEMIS_PASSWORD"),
        url + "?jms.prefetchPolicy.queuePrefetch=20");
    Connection connection = factory.createConnection();
    try {
      connection.start();
      if (args[0].equals("fields")) {
        fields(connection, args[1], Integer.parseInt(args[2]));
      } else {
        int closeAfter = args.length > 3 ? Integer.parseInt(args[3]) : -1;
        int hold = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        group(connection, args[1], args[2], closeAfter, hold);
      }
    } finally {
      connection.close();
    }
  }

  private static void fields(Connection connection, String queue, int count) throws Exception {
    Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
    MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
    for (int i = 0; i < count; i++) {
      Message m = consumer.receive(60_000);
      if (m == null) {
        throw new IllegalStateException("no message within 60 s after " + i);
      }
      Json j = new Json()
          .put("class", kind(m))
          .put("JMSMessageID", m.getJMSMessageID())
          .put("JMSCorrelationID", m.getJMSCorrelationID())
          .put("JMSType", m.getJMSType())
          .put("JMSTimestamp", m.getJMSTimestamp())
          .put("JMSExpiration", m.getJMSExpiration())
          .put("JMSDeliveryMode", m.getJMSDeliveryMode())
          .put("JMSRedelivered", m.getJMSRedelivered())
          .put("received_at", System.currentTimeMillis())
          .put("body", body(m));
      List<String> names = new ArrayList<>();
      for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) {
        names.add((String) e.nextElement());
      }
      Collections.sort(names);
      Json properties = new Json();
      for (String name : names) {
        Object value = m.getObjectProperty(name);
        properties.put(name, new Json().put("type", value.getClass().getSimpleName()).put("value", value));
      }
      System.out.println(j.put("properties", properties));
    }
  }

  private static void group(Connection connection, String queue, String name, int closeAfter, int hold)
      throws Exception {
    Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
    MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
    Thread stdin = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        while (in.readLine() != null) {
          // nothing: the test closes stdin to stop the consumer
        }
      } catch (Exception ignored) {
        // stdin gone: stop as well
      }
    });
    stdin.setDaemon(true);
    stdin.start();
    System.out.println(new Json().put("consumer", name).put("ready", true));
    System.out.flush();
    int acked = 0;
    int held = 0;
    while (stdin.isAlive()) {
      Message m = consumer.receive(200);
      if (m == null) {
        continue;
      }
      boolean ack = closeAfter < 0 || acked < closeAfter;
      // Printed before the acknowledgement: a line for every delivery the application saw.
      System.out.println(new Json().put("consumer", name).put("id", m.getJMSMessageID())
          .put("group", m.getStringProperty("JMSXGroupID")).put("redelivered", m.getJMSRedelivered())
          .put("delivery_count", m.getIntProperty("JMSXDeliveryCount")).put("acked", ack)
          .put("t", System.nanoTime()));
      System.out.flush();
      if (ack) {
        m.acknowledge();
        acked++;
      } else if (++held >= hold) {
        consumer.close();
        System.out.println(new Json().put("consumer", name).put("closed", true).put("t", System.nanoTime()));
        System.out.flush();
        return;
      }
    }
  }

  private static String kind(Message m) {
    if (m instanceof BytesMessage) {
      return "BytesMessage";
    }
    if (m instanceof TextMessage) {
      return "TextMessage";
    }
    return m.getClass().getSimpleName();
  }

  private static Json body(Message m) throws JMSException {
    if (m instanceof BytesMessage bytes) {
      byte[] data = new byte[(int) bytes.getBodyLength()];
      bytes.readBytes(data);
      return new Json().put("base64", Base64.getEncoder().encodeToString(data));
    }
    if (m instanceof TextMessage text) {
      return new Json().put("text", text.getText());
    }
    return new Json().put("other", String.valueOf(m));
  }

  /** Just enough of a JSON object writer for flat values and nested objects. */
  private static final class Json {
    private final StringBuilder out = new StringBuilder("{");

    Json put(String key, Object value) {
      if (out.length() > 1) {
        out.append(',');
      }
      out.append(quote(key)).append(':');
      if (value == null) {
        out.append("null");
      } else if (value instanceof Number || value instanceof Boolean || value instanceof Json) {
        out.append(value);
      } else {
        out.append(quote(value.toString()));
      }
      return this;
    }

    @Override
    public String toString() {
      return out + "}";
    }

    private static String quote(String s) {
      StringBuilder q = new StringBuilder("\"");
      for (char c : s.toCharArray()) {
        if (c == '"' || c == '\\') {
          q.append('\\').append(c);
        } else if (c < 0x20) {
          q.append(String.format("\\u%04x", (int) c));
        } else {
          q.append(c);
        }
      }
      return q.append('"').toString();
    }
  }
}
