// cache_mode.h — on / off / auto, the mode of a cache layer whose use an
// adaptive controller may decide: the Cuckoo Distributor (pipeline.cd,
// CdAdaptiveController) and the SMC (pipeline.smc, CacheCostController).
#ifndef FLOWCLASS_DATAPLANE_CACHE_CACHE_MODE_H_
#define FLOWCLASS_DATAPLANE_CACHE_CACHE_MODE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace flowclass {

enum class CacheMode : uint8_t { kOff = 0, kOn = 1, kAuto = 2 };

// "on" | "off" | "auto".
std::string_view CacheModeName(CacheMode mode);
// Case-sensitive inverse of CacheModeName; INVALID_ARGUMENT naming `field`:
// "FIELD: unknown mode \"x\" (expected on, off or auto)".
absl::StatusOr<CacheMode> ParseCacheMode(std::string_view text, std::string_view field);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_CACHE_CACHE_MODE_H_
