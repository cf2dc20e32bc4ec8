// Library version, recorded in every snapshot.
#ifndef BNN_VERSION_H_
#define BNN_VERSION_H_

namespace bnn {

inline constexpr char kLibraryVersion[] = "0.1.0";

}  // namespace bnn

#endif  // BNN_VERSION_H_
