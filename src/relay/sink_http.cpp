// The HTTP sink of whizbang-relay (issue 32): POSTs each message to one URL with libcurl, one at
// a time and in commit order, over one kept-alive connection. publish() returns only after the
// server answered 2xx (retrying what may succeed later), so flush() has nothing left to wait for.
// Sending at once instead of buffering keeps a large transaction's messages out of memory.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "core/backoff.h"
#include "core/delivery_verdict.h"
#include "core/excerpt.h"
#include "core/uri_parts.h"
#include "relay/sink_env.h"
#include "relay/sinks.h"

namespace whizbang::relay {
namespace {

namespace core = whizbang::core;

// Retry-After beyond this many seconds is cut to it: a server asking for an hour's pause should
// not silence the relay for that long without a log line.
constexpr int64_t kMaxRetryAfterSeconds = 600;
// How much of a refusing server's answer goes into the error message.
constexpr size_t kMaxBodyExcerpt = 300;

struct CurlHandleDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct CurlListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlList = std::unique_ptr<curl_slist, CurlListDeleter>;

// What one POST came back with.
struct Answer {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string retry_after;  // the Retry-After header of the final response, if any
  std::string body;         // its first kMaxBodyExcerpt bytes
  std::string curl_error;   // CURLOPT_ERRORBUFFER
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* answer = static_cast<Answer*>(user);
  const size_t n = size * count;
  if (answer->body.size() < kMaxBodyExcerpt) answer->body.append(data, std::min(n, kMaxBodyExcerpt - answer->body.size()));
  return n;  // read (and drop) the rest, so that the connection stays usable
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* answer = static_cast<Answer*>(user);
  const size_t n = size * count;
  std::string line(data, n);
  // A status line starts the headers of a new response (an interim 100 came first): headers of
  // an earlier one must not count.
  if (line.compare(0, 5, "HTTP/") == 0) answer->retry_after.clear();
  static const std::string kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i) match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    if (match) {
      answer->retry_after = line.substr(kName.size());
      while (!answer->retry_after.empty() && (answer->retry_after.back() == '\r' || answer->retry_after.back() == '\n')) {
        answer->retry_after.pop_back();
      }
    }
  }
  return n;
}

// Transfer failures that another attempt cannot fix: the URL or the TLS set-up is wrong.
// Everything else (refused or reset connections, timeouts, empty answers, DNS hiccups) is
// retried like a 503.
bool curl_error_permanent(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_LOGIN_DENIED:
    case CURLE_FUNCTION_NOT_FOUND:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
      return true;
    default:
      return false;
  }
}

class HttpSink : public Sink {
 public:
  explicit HttpSink(const std::string& uri)
      : uri_(uri),
        shown_(core::redact_password(uri)),
        timeout_s_(env_integer("WHIZBANG_RELAY_HTTP_TIMEOUT", 30, 1, 3600)),
        attempts_(static_cast<int>(env_integer("WHIZBANG_RELAY_HTTP_ATTEMPTS", 10, 1, 1000000))),
        backoff_max_s_(env_integer("WHIZBANG_RELAY_HTTP_BACKOFF_MAX", 30, 1, 3600)),
        random_(std::random_device{}()) {
    static std::once_flag global_init;
    std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_.reset(curl_easy_init());
    if (!curl_) throw SinkError("http sink: curl_easy_init failed", false);
  }

  void publish(const RelayMessage& m) override {
    CurlList headers = make_headers(m);
    for (int attempt = 1;; ++attempt) {
      Answer answer = post(m, headers.get());
      std::string why;
      core::Delivery verdict;
      if (answer.code != CURLE_OK) {
        why = std::string(curl_easy_strerror(answer.code)) + (answer.curl_error.empty() ? "" : ": " + answer.curl_error);
        verdict = curl_error_permanent(answer.code) ? core::Delivery::kRefused : core::Delivery::kRetry;
      } else {
        why = "HTTP " + std::to_string(answer.status) + (answer.body.empty() ? "" : " " + core::quoted_excerpt(answer.body));
        verdict = core::http_status_delivery(answer.status);
      }
      if (verdict == core::Delivery::kAcknowledged) return;
      const std::string what = "http sink " + shown_ + ": message " + m.id + " (" + m.destination + "): " + why;
      if (verdict == core::Delivery::kRefused) throw SinkError(what + " (refused: not retried)", false);
      if (attempt >= attempts_) {
        throw SinkError(what + " after " + std::to_string(attempt) + " attempt(s) (WHIZBANG_RELAY_HTTP_ATTEMPTS)", true);
      }
      const int64_t delay_us = retry_delay_us(attempt, answer);
      std::fprintf(stderr, "whizbang-relay: %s; attempt %d of %d, next in %.1fs\n", what.c_str(), attempt, attempts_,
                   static_cast<double>(delay_us) / 1e6);
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    }
  }

  // publish() returned only after each message's 2xx: nothing is outstanding.
  void flush() override {}

  std::string describe() const override { return shown_; }

 private:
  static void add(CurlList& list, const std::string& line) {
    curl_slist* grown = curl_slist_append(list.get(), line.c_str());
    if (grown == nullptr) throw SinkError("http sink: out of memory building headers", true);
    list.release();
    list.reset(grown);
  }

  static CurlList make_headers(const RelayMessage& m) {
    CurlList list;
    add(list, "Content-Type: application/json");
    // The receiver's dedup key: a message re-sent after a relay restart carries the same one.
    add(list, "Idempotency-Key: " + core::header_value_escape(m.id));
    add(list, "Whizbang-Destination: " + core::header_value_escape(m.destination));
    add(list, "Whizbang-Message-Type: " + core::header_value_escape(m.type));
    if (!m.stream.empty()) add(list, "Whizbang-Stream-Id: " + core::header_value_escape(m.stream));
    // curl would otherwise send "Expect: 100-continue" for larger bodies and wait for an
    // interim answer many servers never send.
    add(list, "Expect:");
    return list;
  }

  Answer post(const RelayMessage& m, curl_slist* headers) {
    Answer answer;
    char error[CURL_ERROR_SIZE] = {0};
    CURL* h = curl_.get();
    // The handle is reused (and with it the connection); only per-request options change.
    curl_easy_setopt(h, CURLOPT_URL, uri_.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, m.json.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m.json.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "whizbang-relay");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts in the relay
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, static_cast<long>(timeout_s_));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(std::min<int64_t>(timeout_s_, 10)));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &answer);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    answer.code = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);  // `error` goes out of scope
    if (answer.code == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &answer.status);
    answer.curl_error = error;
    return answer;
  }

  // The server's Retry-After when it gave seconds, else min(2^(attempt-1), max) seconds with
  // jitter (core::retry_delay_us): a burst of failures does not come back in lockstep.
  int64_t retry_delay_us(int attempt, const Answer& answer) {
    if (auto seconds = core::parse_retry_after_seconds(answer.retry_after, kMaxRetryAfterSeconds)) {
      return *seconds * 1000000;
    }
    return core::retry_delay_us(attempt, 1, backoff_max_s_, std::uniform_real_distribution<double>(0.0, 1.0)(random_));
  }

  std::string uri_;
  std::string shown_;
  int64_t timeout_s_;
  int attempts_;
  int64_t backoff_max_s_;
  std::mt19937_64 random_;
  std::unique_ptr<CURL, CurlHandleDeleter> curl_;
};

}  // namespace

std::unique_ptr<Sink> make_http_sink(const std::string& uri) { return std::make_unique<HttpSink>(uri); }

}  // namespace whizbang::relay
