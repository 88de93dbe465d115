// PlatformConfig: everything a platform needs to make its DeviceBackend and
// its intra-node CollectiveEngine, filled by the daemon from its flags. Node
// identity (process_index) is the daemon's: it is passed to whichever
// platform is chosen, never owned by one platform's options.
//
// PlatformOptions holds each platform's own settings by type: a platform
// defines its options struct in its folder (server/platform/<name>/), reads
// its flags into it (Platform::ReadFlags) and finds it again in
// CreateBackend; nothing here knows which platforms exist. A platform that
// was given no options sees its struct's defaults.
//
// Plain values; thread-compatible.
#ifndef PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_
#define PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_

#include <any>
#include <cstdint>
#include <map>
#include <typeindex>

namespace placement::server {

class PlatformOptions {
 public:
  // The options of type T: those set through Mutable<T>, else T{}.
  template <typename T>
  const T& Get() const {
    auto it = by_type_.find(std::type_index(typeid(T)));
    if (it == by_type_.end()) {
      static const T* const kDefaults = new T();
      return *kDefaults;
    }
    return *std::any_cast<T>(&it->second);
  }

  // The options of type T, made from T{} on first use.
  template <typename T>
  T& Mutable() {
    std::any& slot = by_type_[std::type_index(typeid(T))];
    if (!slot.has_value()) slot = T();
    return *std::any_cast<T>(&slot);
  }

 private:
  std::map<std::type_index, std::any> by_type_;
};

// Options of the LocalEngine that serves groups of this node's devices in
// host memory (directly on host-addressable devices, host-staged
// otherwise); shared by every platform that uses it.
struct LocalCollectiveOptions {
  int num_threads = -1;  // pool threads besides each caller; -1 = default
};

struct PlatformConfig {
  // This node's index among the daemons of a job: device ids are
  // process_index * kMaxLocalDevices + local index.
  int32_t process_index = 0;
  LocalCollectiveOptions local_collectives;
  // Each platform's own settings (its flags), by type.
  PlatformOptions options;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_
