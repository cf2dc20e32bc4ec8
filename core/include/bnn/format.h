// Printing doubles as text that parses back to the same value, for every
// place a number is stored or sent as a string (method parameters, metrics,
// bnnctl output).
#ifndef BNN_FORMAT_H_
#define BNN_FORMAT_H_

#include <string>

namespace bnn {

// The shortest decimal form that parses back (strtod, std::from_chars,
// absl::SimpleAtod) to exactly `value`, from std::to_chars. Fixed notation
// when the decimal exponent lies in [-4, max(15, significant digits)), so
// integers below 1e15 print in full ("100", not "1e+02") and 0.0001 as
// "0.0001"; scientific otherwise ("1e-05", "1e+15", "4.9406564584124654e-324"
// prints as "5e-324"). -0.0 prints as "-0"; non-finite values as "nan",
// "inf", "-inf".
std::string ShortestDouble(double value);

}  // namespace bnn

#endif  // BNN_FORMAT_H_
