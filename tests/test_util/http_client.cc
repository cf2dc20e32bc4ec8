#include "tests/test_util/http_client.h"

#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <absl/time/clock.h>

namespace bnn::testing {
namespace {

// Connects to host:port over IPv4; -1 on failure.
int Connect(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

absl::StatusOr<std::string> Dechunk(absl::string_view body) {
  std::string out;
  while (true) {
    const size_t line_end = body.find("\r\n");
    if (line_end == absl::string_view::npos) {
      return absl::InternalError("truncated chunk size");
    }
    uint64_t size = 0;
    const absl::string_view size_text =
        body.substr(0, line_end).substr(0, body.find(';'));
    if (!absl::SimpleHexAtoi(size_text, &size)) {
      return absl::InternalError("bad chunk size");
    }
    body.remove_prefix(line_end + 2);
    if (size == 0) return out;
    if (body.size() < size + 2) return absl::InternalError("truncated chunk");
    out.append(body.data(), size);
    body.remove_prefix(size + 2);
  }
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(absl::string_view host_port,
                                     absl::string_view path_and_query,
                                     absl::Duration timeout,
                                     absl::string_view method) {
  return HttpRequest(host_port, method, path_and_query, "", {}, timeout);
}

absl::StatusOr<HttpResponse> HttpRequest(
    absl::string_view host_port, absl::string_view method,
    absl::string_view path_and_query, absl::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers,
    absl::Duration timeout) {
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(host_port, ": no port"));
  }
  const std::string host(host_port.substr(0, colon));
  const std::string port(host_port.substr(colon + 1));
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = Connect(host, port);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port,
                                               ": ", std::strerror(errno)));
  }
  std::string request = absl::StrCat(method, " ", path_and_query,
                                     " HTTP/1.1\r\nHost: ", host_port,
                                     "\r\nConnection: close\r\n");
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&request, name, ": ", value, "\r\n");
  }
  if (!body.empty() || method == "POST" || method == "PUT") {
    absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  std::string raw;
  absl::Status status = absl::OkStatus();
  // A server may answer (e.g. 413) and stop reading before the body ends:
  // what it sent is read below all the same.
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  while (status.ok()) {
    const absl::Duration left = deadline - absl::Now();
    pollfd p{fd, POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <=
            0) {
      status = absl::DeadlineExceededError(
          absl::StrCat("no complete response from ", host_port, " within ",
                       absl::FormatDuration(timeout)));
      break;
    }
    char buffer[16384];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = absl::UnavailableError(std::strerror(errno));
      break;
    }
    if (n == 0) break;
    raw.append(buffer, n);
  }
  close(fd);
  if (!status.ok()) return status;

  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    return absl::InternalError(absl::StrCat("no header end in: ", raw));
  }
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw).substr(0, head_end), "\r\n");
  HttpResponse response;
  const std::vector<absl::string_view> status_line =
      absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::InternalError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t separator = lines[i].find(':');
    if (separator == absl::string_view::npos) continue;
    response.headers[absl::AsciiStrToLower(lines[i].substr(0, separator))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(separator + 1)));
  }
  const absl::string_view payload = absl::string_view(raw).substr(head_end + 4);
  if (response.headers["transfer-encoding"] == "chunked") {
    absl::StatusOr<std::string> dechunked = Dechunk(payload);
    if (!dechunked.ok()) return dechunked.status();
    response.body = *std::move(dechunked);
  } else {
    response.body = std::string(payload);
  }
  return response;
}

std::string PathWithQuery(
    absl::string_view path,
    const std::vector<std::pair<std::string, std::string>>& params) {
  auto encode = [](absl::string_view text) {
    std::string out;
    for (const char c : text) {
      if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
          c == '~') {
        out.push_back(c);
      } else {
        absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
      }
    }
    return out;
  };
  std::string out(path);
  for (size_t i = 0; i < params.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "?" : "&", encode(params[i].first), "=",
                    encode(params[i].second));
  }
  return out;
}

}  // namespace bnn::testing
