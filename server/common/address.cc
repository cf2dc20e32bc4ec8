#include "server/common/address.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

namespace bnn::server {

absl::Status SplitHostPort(absl::string_view address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not host:port"));
  }
  absl::string_view host_part = address.substr(0, colon);
  if (host_part.size() >= 2 && host_part.front() == '[' &&
      host_part.back() == ']') {
    host_part = host_part.substr(1, host_part.size() - 2);
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' has no valid port (0..65535)"));
  }
  *host = std::string(host_part);
  return absl::OkStatus();
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace bnn::server
