// host:port strings of the --listen flags.
#ifndef BNN_SERVER_COMMON_ADDRESS_H_
#define BNN_SERVER_COMMON_ADDRESS_H_

#include <string>

#include <absl/status/status.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

// Splits "host:port" or "[v6 host]:port" (brackets removed from `host`);
// InvalidArgument unless the port is in 0..65535.
absl::Status SplitHostPort(absl::string_view address, std::string* host,
                           int* port);

// Whether `host` (as SplitHostPort returns it) reaches only this machine:
// "localhost", an IPv4 address in 127.0.0.0/8, "::1" or ::ffff:127.x.y.z.
// Anything else, including "" and "0.0.0.0" (every interface), is not.
bool IsLoopbackHost(absl::string_view host);

// Inverse of SplitHostPort: brackets an IPv6 host.
std::string JoinHostPort(absl::string_view host, int port);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_ADDRESS_H_
