// drivers/amd/libdrm: libdrm and libdrm_amdgpu loaded at run time. This machine kind (CI) has the
// libraries (Debian's libdrm2 and libdrm-amdgpu1, which ./bare installs) and no GPU: what runs
// here is the loading, the enumeration (every render node it lists is well formed; none is
// expected), and the named errors for a missing library and for fds that are not amdgpu DRM
// devices. The amdgpu queries themselves run only on a machine with an AMD GPU (bare info AMD).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "drivers/amd/libdrm.h"

namespace baregrad::amd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(AmdLibdrm, EnumeratesRenderNodesOrNamesTheMissingLibrary) {
  Result<std::vector<DrmRenderNode>> nodes = drm_render_nodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().to_string() << " (./bare installs libdrm2)";
  for (const DrmRenderNode& n : *nodes) {
    EXPECT_THAT(n.path, StartsWith("/dev/dri/renderD"));
    if (n.pci) {
      EXPECT_EQ(n.pci_slot.size(), 12u) << n.pci_slot;  // "0000:03:00.0"
    }
  }
  Result<std::vector<DrmRenderNode>> missing = drm_render_nodes("libdrm-not-here.so.9");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot load libdrm libdrm-not-here.so.9"));
}

TEST(AmdLibdrm, AnFdThatIsNotAnAmdgpuDeviceIsRefusedByName) {
  int fd = ::open("/dev/null", O_RDWR);
  ASSERT_GE(fd, 0);
  Result<AmdgpuDrmInfo> info = amdgpu_drm_info(fd);
  ::close(fd);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(info.status().message(),
              HasSubstr("DRM device fd " + std::to_string(fd) + " is not a DRM device"));
  Result<AmdgpuDrmInfo> closed = amdgpu_drm_info(-1);
  EXPECT_EQ(closed.status().code(), StatusCode::kFailedPrecondition);
  Result<AmdgpuDrmInfo> no_lib = amdgpu_drm_info(0, "libdrm-not-here.so.9");
  EXPECT_EQ(no_lib.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace baregrad::amd
