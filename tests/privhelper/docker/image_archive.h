// A Docker image archive made in the test (the `docker save` layout: manifest.json, the
// config, one layer of random bytes), so its image ID and tag are new to any daemon. Its end
// is zero padding beyond the end-of-archive blocks, so that every tar entry — the
// end-of-archive marker included — lies before the last `withheld` bytes: the hardest case for
// the overlapped load's withheld tail (privhelper/store/overlapped_load.h).
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_DOCKER_IMAGE_ARCHIVE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_DOCKER_IMAGE_ARCHIVE_H_

#include <cstddef>
#include <string>

namespace sn::testing {

struct CraftedImage {
  std::string archive;   // the archive's bytes
  std::string image_id;  // "sha256:" + the config's digest
  std::string tag;       // "sn-overlap-test/<random>:latest", named by manifest.json
  size_t entries_end = 0;  // where the end-of-archive blocks begin
};

// One ustar header: a regular file ('0'), directory ('5'), link ('1', '2': `link`) or an
// extension record, named `name` (at most 100 bytes are kept), with a correct checksum.
std::string TarHeader(const std::string& name, char type, size_t size,
                      const std::string& link = "");

// `layer_bytes` random bytes in the layer; `withheld` bytes (a multiple of 512) of zeros after
// a complete archive (end-of-archive blocks included).
CraftedImage MakeImageArchive(size_t layer_bytes, size_t withheld);

}  // namespace sn::testing

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_DOCKER_IMAGE_ARCHIVE_H_
