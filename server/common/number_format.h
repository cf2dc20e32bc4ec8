// Printing doubles for people and for round trips.
#ifndef BNN_SERVER_COMMON_NUMBER_FORMAT_H_
#define BNN_SERVER_COMMON_NUMBER_FORMAT_H_

#include <string>

namespace bnn::server {

// The shortest form that parses back to exactly `value`: integers below
// 1e15 in full ("100"), others in the shortest %g ("0.1", not
// "0.10000000000000001"; "1e-05"). Non-finite values print as "nan", "inf",
// "-inf".
std::string ShortestDouble(double value);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_NUMBER_FORMAT_H_
