// sluice-test-client: a small synchronous Beast HTTP/1.1 client for the integration tests.
//
// One mode per run, one JSON object on stdout when it ends:
//   --requests N [--keepalive] [--pipeline K]   N requests; statuses and X-Origin values counted.
//       Without --keepalive every request has its own connection (`Connection: close`). With
//       --pipeline K, K requests are written in one go and then K responses read, on one
//       connection. Every request carries `X-Seq: i`; when the response is the origin's echo
//       (`?echo=1`), the echoed X-Seq must be i, which proves the answers came back in order.
//   --upload BYTES [--chunked]   POST a generated body of BYTES, streamed from one 64 KiB slice
//       (Content-Length, or chunked framing), then read the answer (e.g. a `?sink=1` URL's JSON).
//   --download                   GET, read the body in 256 KiB steps and count it.
//   --websocket N                WebSocket handshake on the URL, then N messages written while
//       their echoes are read; every echo is checked (see websocket.hpp).
//   --websocket-script           WebSocket handshake, then commands from stdin (websocket.hpp).
// Memory stays flat in every mode: bodies pass through one fixed slice, and only the first
// `body_keep` bytes of a response body are kept (for the summary and the X-Seq check).
//
// Bounded in time: a watchdog ends the process (exit 3, {"error":"timeout"}) after --timeout
// seconds. Exit 0 when every exchange completed at the HTTP level (whatever the status), 1 when
// a transport error or an order error happened, 2 for bad arguments.

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/json.hpp>

#include "websocket.hpp"

namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using boost::system::error_code;

constexpr std::size_t slice_size = 256 * 1024;   // response body bytes per read
constexpr std::size_t upload_slice = 64 * 1024;  // request body bytes per write (and per chunk)
constexpr std::size_t body_keep = 64 * 1024;     // response body bytes kept for the summary
constexpr std::size_t max_errors_listed = 10;

const char* const usage =
    "usage: sluice-test-client --url http://HOST:PORT/TARGET [mode] [options]\n"
    "modes (default --requests 1):\n"
    "  --requests N           N requests (GET unless --method)\n"
    "  --upload BYTES         POST a generated body of BYTES bytes\n"
    "  --download             GET and count the body bytes\n"
    "  --websocket N          WebSocket: N messages echoed and checked\n"
    "  --websocket-script     WebSocket: commands from stdin (echo N, wait-close, close)\n"
    "options:\n"
    "  --keepalive            reuse one connection (--requests)\n"
    "  --pipeline K           write K requests, then read K responses (--requests; implies\n"
    "                         --keepalive)\n"
    "  --chunked              send the upload with Transfer-Encoding: chunked\n"
    "  --method M             request method (default GET, POST for --upload)\n"
    "  --header 'Name: value' extra request header (repeatable)\n"
    "  --timeout SECONDS      give up after this long (default 60)\n";

struct Url {
  std::string host;
  std::string port;
  std::string target;
};

struct Options {
  Url url;
  enum class Mode { requests, upload, download, websocket, websocket_script } mode = Mode::requests;
  std::uint64_t ws_messages = 0;
  std::uint64_t requests = 1;
  std::uint64_t upload_bytes = 0;
  bool keepalive = false;
  std::uint64_t pipeline = 0;
  bool chunked = false;
  std::string method;
  std::vector<std::string> headers;
  double timeout_s = 60;
};

std::uint64_t parse_count(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || v[0] == '-')
    throw std::invalid_argument(flag + ": expected a non-negative integer, got '" + v + "'");
  return n;
}

Url parse_url(const std::string& text) {
  constexpr std::string_view scheme = "http://";
  if (!text.starts_with(scheme)) throw std::invalid_argument("--url: only http:// is supported");
  const auto rest = text.substr(scheme.size());
  const auto slash = rest.find('/');
  const auto authority = rest.substr(0, slash);
  Url u;
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  const auto colon = authority.rfind(':');
  if (colon == std::string::npos || authority.ends_with(']')) {
    u.host = authority;
    u.port = "80";
  } else {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  }
  if (u.host.starts_with('[') && u.host.ends_with(']'))
    u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty()) throw std::invalid_argument("--url: no host in '" + text + "'");
  return u;
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool have_url = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + ": missing value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      std::exit(0);
    } else if (arg == "--url") {
      o.url = parse_url(value());
      have_url = true;
    } else if (arg == "--requests") {
      o.mode = Options::Mode::requests;
      o.requests = parse_count(arg, value());
    } else if (arg == "--upload") {
      o.mode = Options::Mode::upload;
      o.upload_bytes = parse_count(arg, value());
    } else if (arg == "--download") {
      o.mode = Options::Mode::download;
    } else if (arg == "--websocket") {
      o.mode = Options::Mode::websocket;
      o.ws_messages = parse_count(arg, value());
    } else if (arg == "--websocket-script") {
      o.mode = Options::Mode::websocket_script;
    } else if (arg == "--keepalive") {
      o.keepalive = true;
    } else if (arg == "--pipeline") {
      o.pipeline = parse_count(arg, value());
      if (o.pipeline == 0) throw std::invalid_argument("--pipeline: must be at least 1");
      o.keepalive = true;
    } else if (arg == "--chunked") {
      o.chunked = true;
    } else if (arg == "--method") {
      o.method = value();
    } else if (arg == "--header") {
      auto h = value();
      if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos)
        throw std::invalid_argument("--header: expected 'Name: value', got '" + h + "'");
      o.headers.push_back(std::move(h));
    } else if (arg == "--timeout") {
      const auto v = value();
      try {
        o.timeout_s = std::stod(v);
      } catch (const std::exception&) {
        o.timeout_s = -1;
      }
      if (!(o.timeout_s > 0)) throw std::invalid_argument("--timeout: expected seconds > 0");
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'");
    }
  }
  if (!have_url) throw std::invalid_argument("--url is required");
  if (o.method.empty()) o.method = o.mode == Options::Mode::upload ? "POST" : "GET";
  return o;
}

// Peak resident set of this process (VmHWM), to show that the client itself stayed flat.
std::uint64_t peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// One response as far as the summary cares.
struct Response {
  unsigned status = 0;
  std::string origin;      // X-Origin
  std::string request_id;  // X-Request-Id
  std::string sluice_error;
  std::string body;  // the first body_keep bytes
  std::uint64_t body_bytes = 0;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = false;
  unsigned interim = 0;  // 1xx responses seen before this one
};

// A connection to the URL's server with its read buffer. Synchronous: the watchdog bounds time.
class Connection {
 public:
  Connection(net::io_context& io, const tcp::resolver::results_type& where) : socket_(io) {
    net::connect(socket_, where);
    socket_.set_option(tcp::no_delay(true));
  }

  void write(std::string_view bytes, error_code& ec) {
    net::write(socket_, net::buffer(bytes.data(), bytes.size()), ec);
  }

  // Reads one final response (skipping 1xx), streaming the body through a fixed slice.
  Response read(bool head_request, error_code& ec) {
    Response r;
    for (;;) {
      http::response_parser<http::buffer_body> p;
      p.body_limit(boost::none);
      if (head_request) p.skip(true);
      http::read_header(socket_, buffer_, p, ec);
      if (ec) return r;
      const auto& res = p.get();
      r.status = res.result_int();
      if (r.status >= 100 && r.status < 200) {
        ++r.interim;
        continue;
      }
      r.origin = std::string(res["X-Origin"]);
      r.request_id = std::string(res["X-Request-Id"]);
      r.sluice_error = std::string(res["Sluice-Error"]);
      if (const auto cl = p.content_length()) r.content_length = *cl;
      r.chunked = p.chunked();
      r.keep_alive = p.keep_alive();
      if (r.content_length && !p.is_done()) {
        // A Content-Length body needs no parsing: read it straight from the socket, big reads,
        // no copy through the parser (twice as fast for the 1 GiB transfers).
        read_counted(*r.content_length, r, ec);
        return r;
      }
      while (!p.is_done()) {
        p.get().body().data = slice_;
        p.get().body().size = sizeof slice_;
        http::read(socket_, buffer_, p, ec);
        if (ec == http::error::need_buffer) ec = {};
        if (ec) return r;
        const auto n = sizeof slice_ - p.get().body().size;
        if (r.body.size() < body_keep)
          r.body.append(slice_, std::min<std::size_t>(n, body_keep - r.body.size()));
        r.body_bytes += n;
      }
      return r;
    }
  }

 private:
  // Exactly `length` body bytes: first what the head read left in buffer_, then from the socket.
  // Bytes after the body (a pipelined next response) stay in buffer_.
  void read_counted(std::uint64_t length, Response& r, error_code& ec) {
    const auto take = [&](const char* data, std::size_t n) {
      if (r.body.size() < body_keep)
        r.body.append(data, std::min<std::size_t>(n, body_keep - r.body.size()));
      r.body_bytes += n;
    };
    const auto buffered = static_cast<std::size_t>(std::min<std::uint64_t>(buffer_.size(), length));
    take(static_cast<const char*>(buffer_.data().data()), buffered);
    buffer_.consume(buffered);
    while (r.body_bytes < length) {
      const auto want =
          static_cast<std::size_t>(std::min<std::uint64_t>(sizeof slice_, length - r.body_bytes));
      const auto n = socket_.read_some(net::buffer(slice_, want), ec);
      if (ec) return;
      take(slice_, n);
    }
  }

  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  char slice_[slice_size];
};

std::string request_head(const Options& o, std::string_view extra) {
  std::string head = o.method + " " + o.url.target + " HTTP/1.1\r\nHost: " + o.url.host + ":" +
                     o.url.port + "\r\nUser-Agent: sluice-test-client\r\n";
  for (const auto& h : o.headers) head.append(h).append("\r\n");
  head.append(extra);
  head.append("\r\n");
  return head;
}

// The X-Seq value the origin echoed back (echo=1 JSON: "headers": [[name, value], ...]), if any.
std::optional<std::string> echoed_seq(const std::string& body) {
  error_code ec;
  const auto v = json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* headers = v.as_object().if_contains("headers");
  if (headers == nullptr || !headers->is_array()) return std::nullopt;
  for (const auto& h : headers->as_array()) {
    if (!h.is_array() || h.as_array().size() != 2) continue;
    const auto& name = h.as_array()[0];
    const auto& value = h.as_array()[1];
    if (name.is_string() && value.is_string() && name.as_string().size() == 5) {
      std::string n(name.as_string());
      for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (n == "x-seq") return std::string(value.as_string());
    }
  }
  return std::nullopt;
}

// A body that is JSON goes into the summary as JSON; anything else as text.
json::value body_value(const std::string& body) {
  error_code ec;
  auto v = json::parse(body, ec);
  if (!ec) return v;
  return json::string(body);
}

std::atomic<std::uint64_t> progress{0};  // completed exchanges, for the timeout report

json::object run_requests(const Options& o, net::io_context& io,
                          const tcp::resolver::results_type& where, bool& ok) {
  std::map<std::string, std::uint64_t> statuses;
  std::map<std::string, std::uint64_t> origins;
  json::array errors;
  std::uint64_t connections = 0;
  std::uint64_t completed = 0;
  std::uint64_t body_bytes = 0;
  std::uint64_t seq_checked = 0;
  std::uint64_t order_errors = 0;
  std::uint64_t transport_errors = 0;
  const bool head = o.method == "HEAD";
  const std::uint64_t batch = o.pipeline != 0 ? o.pipeline : 1;
  const auto note_error = [&](std::string text) {
    ++transport_errors;
    if (errors.size() < max_errors_listed) errors.emplace_back(json::string(text));
  };

  std::optional<Connection> conn;
  std::uint64_t next = 0;
  while (next < o.requests) {
    if (!conn) {
      try {
        conn.emplace(io, where);
        ++connections;
      } catch (const std::exception& e) {
        note_error(std::string("connect: ") + e.what());
        ++next;  // this request is lost; go on, bounded by the count
        continue;
      }
    }
    const std::uint64_t count = std::min(batch, o.requests - next);
    std::string out;
    for (std::uint64_t i = 0; i < count; ++i) {
      out += request_head(o, "X-Seq: " + std::to_string(next + i) + "\r\n" +
                                 (o.keepalive ? "" : "Connection: close\r\n"));
    }
    error_code ec;
    conn->write(out, ec);
    if (ec) {
      note_error("write: " + ec.message());
      conn.reset();
      next += count;
      continue;
    }
    bool reconnect = !o.keepalive;
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto r = conn->read(head, ec);
      if (ec) {
        note_error("read response " + std::to_string(next + i) + ": " + ec.message());
        reconnect = true;
        break;
      }
      ++completed;
      progress.store(completed, std::memory_order_relaxed);
      ++statuses[std::to_string(r.status)];
      if (!r.origin.empty()) ++origins[r.origin];
      body_bytes += r.body_bytes;
      if (const auto seq = echoed_seq(r.body)) {
        ++seq_checked;
        if (*seq != std::to_string(next + i)) {
          ++order_errors;
          if (errors.size() < max_errors_listed)
            errors.emplace_back(
                json::string("response " + std::to_string(next + i) + " echoes X-Seq " + *seq));
        }
      }
      if (!r.keep_alive) {
        reconnect = true;
        if (i + 1 < count) {
          note_error("connection closed by the server after response " + std::to_string(next + i) +
                     " with " + std::to_string(count - i - 1) + " pipelined request(s) unanswered");
        }
        break;
      }
    }
    next += count;
    if (reconnect) conn.reset();
  }

  json::object out;
  out["mode"] = "requests";
  out["requests"] = o.requests;
  out["completed"] = completed;
  json::object s;
  for (const auto& [k, v] : statuses) s[k] = v;
  out["statuses"] = std::move(s);
  json::object org;
  for (const auto& [k, v] : origins) org[k] = v;
  out["origins"] = std::move(org);
  out["connections"] = connections;
  out["body_bytes"] = body_bytes;
  out["seq_checked"] = seq_checked;
  out["order_errors"] = order_errors;
  out["transport_errors"] = transport_errors;
  out["errors"] = std::move(errors);
  ok = transport_errors == 0 && order_errors == 0 && completed == o.requests;
  return out;
}

json::object response_summary(const Response& r) {
  json::object out;
  out["status"] = r.status;
  out["origin"] = r.origin;
  out["request_id"] = r.request_id;
  out["sluice_error"] = r.sluice_error;
  out["body_bytes"] = r.body_bytes;
  if (r.content_length)
    out["content_length"] = *r.content_length;
  else
    out["content_length"] = nullptr;
  out["chunked"] = r.chunked;
  out["keep_alive"] = r.keep_alive;
  out["interim"] = r.interim;
  return out;
}

json::object run_upload(const Options& o, net::io_context& io,
                        const tcp::resolver::results_type& where, bool& ok) {
  Connection conn(io, where);
  std::string framing = o.chunked ? std::string("Transfer-Encoding: chunked\r\n")
                                  : "Content-Length: " + std::to_string(o.upload_bytes) + "\r\n";
  // Printable and position-dependent, so that a lost or repeated slice changes the bytes.
  static char slice[upload_slice];
  for (std::size_t i = 0; i < upload_slice; ++i) slice[i] = static_cast<char>('a' + (i * 7) % 26);

  json::object out;
  out["mode"] = "upload";
  error_code ec;
  conn.write(request_head(o, framing), ec);
  std::uint64_t sent = 0;
  while (!ec && sent < o.upload_bytes) {
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(upload_slice, o.upload_bytes - sent));
    if (o.chunked) {
      char size_line[32];
      const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", n);
      conn.write(std::string_view(size_line, static_cast<std::size_t>(len)), ec);
      if (!ec) conn.write(std::string_view(slice, n), ec);
      if (!ec) conn.write("\r\n", ec);
    } else {
      conn.write(std::string_view(slice, n), ec);
    }
    if (!ec) sent += n;
  }
  if (!ec && o.chunked) conn.write("0\r\n\r\n", ec);
  out["sent_bytes"] = sent;
  // A server may answer early (413) and stop reading: try to read its answer regardless.
  if (ec) out["write_error"] = ec.message();
  error_code read_ec;
  const auto r = conn.read(false, read_ec);
  if (read_ec) {
    out["error"] = "read response: " + read_ec.message();
    ok = false;
  } else {
    ok = !ec;
  }
  for (auto& [k, v] : response_summary(r)) out[k] = v;
  out["body"] = body_value(r.body);
  return out;
}

json::object run_download(const Options& o, net::io_context& io,
                          const tcp::resolver::results_type& where, bool& ok) {
  Connection conn(io, where);
  json::object out;
  out["mode"] = "download";
  error_code ec;
  conn.write(request_head(o, "Connection: close\r\n"), ec);
  Response r;
  if (!ec) r = conn.read(o.method == "HEAD", ec);
  if (ec) out["error"] = ec.message();
  ok = !ec && (!r.content_length || *r.content_length == r.body_bytes);
  for (auto& [k, v] : response_summary(r)) out[k] = v;
  if (r.body_bytes <= 4096) out["body"] = body_value(r.body);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sluice-test-client: " << e.what() << "\n" << usage;
    return 2;
  }

  // Watchdog: the synchronous calls have no deadline of their own, the whole run has one.
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  const auto start = std::chrono::steady_clock::now();
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    const auto limit = std::chrono::duration<double>(o.timeout_s);
    if (cv.wait_for(lock, limit, [&] { return finished; })) return;
    std::printf("{\"error\":\"timeout\",\"timeout_s\":%g,\"completed\":%llu}\n", o.timeout_s,
                static_cast<unsigned long long>(progress.load()));
    std::fflush(stdout);
    std::_Exit(3);
  });

  int rc = 1;
  json::object out;
  try {
    net::io_context io;
    tcp::resolver resolver(io);
    const auto where = resolver.resolve(o.url.host, o.url.port);
    bool ok = false;
    switch (o.mode) {
      case Options::Mode::requests:
        out = run_requests(o, io, where, ok);
        break;
      case Options::Mode::upload:
        out = run_upload(o, io, where, ok);
        break;
      case Options::Mode::download:
        out = run_download(o, io, where, ok);
        break;
      case Options::Mode::websocket:
        out = sluice::client::run_websocket({o.url.host, o.url.port, o.url.target, o.headers},
                                            o.ws_messages, io, where, progress, ok);
        break;
      case Options::Mode::websocket_script:
        out = sluice::client::run_websocket_script({o.url.host, o.url.port, o.url.target, o.headers},
                                                   io, where, ok);
        break;
    }
    rc = ok ? 0 : 1;
  } catch (const std::exception& e) {
    out["error"] = e.what();
    rc = 1;
  }
  out["elapsed_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  out["client_peak_rss_kib"] = peak_rss_kib();
  {
    std::lock_guard lock(m);
    finished = true;
  }
  cv.notify_one();
  watchdog.join();
  std::cout << json::serialize(out) << std::endl;
  return rc;
}
