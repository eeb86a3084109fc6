// Field positions of the QMD versions baregrad writes. Each entry names the field of NVIDIA's
// qmd header it mirrors (open-gpu-doc classes/compute; README.md names the commit):
//   v3: NVC6C0_QMDV03_00_<name> in clc6c0qmd.h (the same positions in clc7c0qmd.h,
//       clc9c0qmd.h and clcbc0qmd.h's NVCBC0_QMDV03_00_*)
//   v4: NVCBC0_QMDV04_00_<name> in clcbc0qmd.h
//   v5: NVCDC0_QMDV05_00_<name> in clcdc0qmd.h (the same in clcec0qmd.h's NVCEC0_QMDV05_00_*)
// Array fields (<name>(i)) give element 0 and the stride between elements.
#include "base/check.h"
#include "drivers/nv/qmd.h"

namespace baregrad::nv {
namespace {

constexpr QmdField mw(uint16_t hi, uint16_t lo) { return {hi, lo}; }
constexpr QmdArrayField mw_array(uint16_t hi, uint16_t lo, uint32_t stride) {
  return {{hi, lo}, stride};
}

constexpr QmdLayout kV3{
    .version = QmdVersion::kV3,
    .size_bytes = 256,
    .major_version = mw(583, 580),                     // QMD_MAJOR_VERSION
    .minor_version = mw(579, 576),                     // QMD_VERSION
    .qmd_type = {},                                    // (none; IS_QUEUE 136 stays 0)
    .sm_global_caching_enable = mw(134, 134),          // SM_GLOBAL_CACHING_ENABLE
    .qmd_group_id = mw(133, 128),                      // QMD_GROUP_ID
    .invalidate_texture_header_cache = mw(186, 186),   // INVALIDATE_TEXTURE_HEADER_CACHE
    .invalidate_texture_sampler_cache = mw(187, 187),  // INVALIDATE_TEXTURE_SAMPLER_CACHE
    .invalidate_texture_data_cache = mw(188, 188),     // INVALIDATE_TEXTURE_DATA_CACHE
    .invalidate_shader_data_cache = mw(189, 189),      // INVALIDATE_SHADER_DATA_CACHE
    .api_visible_call_limit = mw(378, 378),            // API_VISIBLE_CALL_LIMIT
    .sampler_index = mw(382, 382),                     // SAMPLER_INDEX
    .cwd_membar_type = mw(369, 368),                   // CWD_MEMBAR_TYPE
    .grid_width = mw(415, 384),                        // CTA_RASTER_WIDTH
    .grid_height = mw(431, 416),                       // CTA_RASTER_HEIGHT
    .grid_depth = mw(463, 448),                        // CTA_RASTER_DEPTH
    .cta_thread_dimension0 = mw(607, 592),             // CTA_THREAD_DIMENSION0
    .cta_thread_dimension1 = mw(623, 608),             // CTA_THREAD_DIMENSION1
    .cta_thread_dimension2 = mw(639, 624),             // CTA_THREAD_DIMENSION2
    .program_address_lower = mw(1567, 1536),           // PROGRAM_ADDRESS_LOWER
    .program_address_upper = mw(1584, 1568),           // PROGRAM_ADDRESS_UPPER
    .program_address_shift = 0,
    .program_prefetch_addr_lower_shifted = mw(287, 256),    // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED
    .program_prefetch_addr_upper_shifted = mw(1640, 1632),  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED
    .program_prefetch_size = mw(1649, 1641),                // PROGRAM_PREFETCH_SIZE
    .shared_memory_size = mw(561, 544),                     // SHARED_MEMORY_SIZE
    .shared_memory_shift = 0,
    .min_sm_config_shared_mem_size = mw(567, 562),     // MIN_SM_CONFIG_SHARED_MEM_SIZE
    .max_sm_config_shared_mem_size = mw(574, 569),     // MAX_SM_CONFIG_SHARED_MEM_SIZE
    .target_sm_config_shared_mem_size = mw(662, 657),  // TARGET_SM_CONFIG_SHARED_MEM_SIZE
    .register_count = mw(656, 648),                    // REGISTER_COUNT_V
    .barrier_count = mw(767, 763),                     // BARRIER_COUNT
    .shader_local_memory_low_size = mw(759, 736),      // SHADER_LOCAL_MEMORY_LOW_SIZE
    .shader_local_memory_high_size = mw(1623, 1600),   // SHADER_LOCAL_MEMORY_HIGH_SIZE
    .shader_local_memory_shift = 0,
    .sass_version = mw(1663, 1656),                             // SASS_VERSION
    .constant_buffer_addr_lower = mw_array(1055, 1024, 64),     // CONSTANT_BUFFER_ADDR_LOWER(i)
    .constant_buffer_addr_upper = mw_array(1072, 1056, 64),     // CONSTANT_BUFFER_ADDR_UPPER(i)
    .constant_buffer_size_shifted4 = mw_array(1087, 1075, 64),  // CONSTANT_BUFFER_SIZE_SHIFTED4(i)
    .constant_buffer_valid = mw_array(640, 640, 1),             // CONSTANT_BUFFER_VALID(i)
    .constant_buffer_invalidate = mw_array(1074, 1074, 64),     // CONSTANT_BUFFER_INVALIDATE(i)
    .constant_buffer_addr_shift = 0,
    .release = {{
        {
            .enable = mw(823, 823),          // RELEASE0_ENABLE
            .structure_size = mw(831, 830),  // RELEASE0_STRUCTURE_SIZE
            .membar_type = mw(819, 819),     // RELEASE0_MEMBAR_TYPE
            .payload64b = mw(829, 829),      // RELEASE0_PAYLOAD64B
            .address_lower = mw(799, 768),   // RELEASE0_ADDRESS_LOWER
            .address_upper = mw(807, 800),   // RELEASE0_ADDRESS_UPPER
            .payload_lower = mw(863, 832),   // RELEASE0_PAYLOAD_LOWER
            .payload_upper = mw(895, 864),   // RELEASE0_PAYLOAD_UPPER
        },
        {
            .enable = mw(951, 951),          // RELEASE1_ENABLE
            .structure_size = mw(959, 958),  // RELEASE1_STRUCTURE_SIZE
            .membar_type = mw(947, 947),     // RELEASE1_MEMBAR_TYPE
            .payload64b = mw(957, 957),      // RELEASE1_PAYLOAD64B
            .address_lower = mw(927, 896),   // RELEASE1_ADDRESS_LOWER
            .address_upper = mw(935, 928),   // RELEASE1_ADDRESS_UPPER
            .payload_lower = mw(991, 960),   // RELEASE1_PAYLOAD_LOWER
            .payload_upper = mw(1023, 992),  // RELEASE1_PAYLOAD_UPPER
        },
        {
            .enable = mw(1719, 1719),          // RELEASE2_ENABLE
            .structure_size = mw(1727, 1726),  // RELEASE2_STRUCTURE_SIZE
            .membar_type = mw(1715, 1715),     // RELEASE2_MEMBAR_TYPE
            .payload64b = mw(1725, 1725),      // RELEASE2_PAYLOAD64B
            .address_lower = mw(1695, 1664),   // RELEASE2_ADDRESS_LOWER
            .address_upper = mw(1703, 1696),   // RELEASE2_ADDRESS_UPPER
            .payload_lower = mw(1759, 1728),   // RELEASE2_PAYLOAD_LOWER
            .payload_upper = mw(1791, 1760),   // RELEASE2_PAYLOAD_UPPER
        },
    }},
    .dependent_qmd0_pointer = mw(511, 480),   // DEPENDENT_QMD0_POINTER
    .dependent_qmd0_enable = mw(512, 512),    // DEPENDENT_QMD0_ENABLE
    .dependent_qmd0_action = mw(515, 513),    // DEPENDENT_QMD0_ACTION
    .dependent_qmd0_prefetch = mw(516, 516),  // DEPENDENT_QMD0_PREFETCH
};

constexpr QmdLayout kV4{
    .version = QmdVersion::kV4,
    .size_bytes = 384,
    .major_version = mw(583, 580),                     // QMD_MAJOR_VERSION
    .minor_version = mw(579, 576),                     // QMD_MINOR_VERSION
    .qmd_type = mw(25, 23),                            // QMD_TYPE
    .sm_global_caching_enable = {},                    // (none)
    .qmd_group_id = mw(21, 16),                        // QMD_GROUP_ID
    .invalidate_texture_header_cache = mw(602, 602),   // INVALIDATE_TEXTURE_HEADER_CACHE
    .invalidate_texture_sampler_cache = mw(603, 603),  // INVALIDATE_TEXTURE_SAMPLER_CACHE
    .invalidate_texture_data_cache = mw(604, 604),     // INVALIDATE_TEXTURE_DATA_CACHE
    .invalidate_shader_data_cache = mw(605, 605),      // INVALIDATE_SHADER_DATA_CACHE
    .api_visible_call_limit = mw(568, 568),            // API_VISIBLE_CALL_LIMIT
    .sampler_index = mw(569, 569),                     // SAMPLER_INDEX
    .cwd_membar_type = mw(1137, 1136),                 // CWD_MEMBAR_TYPE
    .grid_width = mw(1055, 1024),                      // GRID_WIDTH
    .grid_height = mw(1071, 1056),                     // GRID_HEIGHT
    .grid_depth = mw(1103, 1088),                      // GRID_DEPTH
    .cta_thread_dimension0 = mw(1167, 1152),           // CTA_THREAD_DIMENSION0
    .cta_thread_dimension1 = mw(1183, 1168),           // CTA_THREAD_DIMENSION1
    .cta_thread_dimension2 = mw(1199, 1184),           // CTA_THREAD_DIMENSION2
    .program_address_lower = mw(1247, 1216),           // PROGRAM_ADDRESS_LOWER
    .program_address_upper = mw(1272, 1248),           // PROGRAM_ADDRESS_UPPER
    .program_address_shift = 0,
    .program_prefetch_addr_lower_shifted = mw(1375, 1344),  // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED
    .program_prefetch_addr_upper_shifted = mw(1392, 1376),  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED
    .program_prefetch_size = mw(1401, 1393),                // PROGRAM_PREFETCH_SIZE
    .shared_memory_size = mw(601, 584),                     // SHARED_MEMORY_SIZE
    .shared_memory_shift = 0,
    .min_sm_config_shared_mem_size = mw(613, 608),     // MIN_SM_CONFIG_SHARED_MEM_SIZE
    .max_sm_config_shared_mem_size = mw(619, 614),     // MAX_SM_CONFIG_SHARED_MEM_SIZE
    .target_sm_config_shared_mem_size = mw(625, 620),  // TARGET_SM_CONFIG_SHARED_MEM_SIZE
    .register_count = mw(1208, 1200),                  // REGISTER_COUNT
    .barrier_count = mw(1215, 1211),                   // BARRIER_COUNT
    .shader_local_memory_low_size = mw(535, 512),      // SHADER_LOCAL_MEMORY_LOW_SIZE
    .shader_local_memory_high_size = mw(567, 544),     // SHADER_LOCAL_MEMORY_HIGH_SIZE
    .shader_local_memory_shift = 0,
    .sass_version = mw(543, 536),  // SASS_VERSION
    .constant_buffer_addr_lower =
        mw_array(1567, 1536, 64),  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(i)
    .constant_buffer_addr_upper =
        mw_array(1586, 1568, 64),  // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(i)
    .constant_buffer_size_shifted4 = mw_array(1599, 1587, 64),  // CONSTANT_BUFFER_SIZE_SHIFTED4(i)
    .constant_buffer_valid = mw_array(416, 416, 4),             // CONSTANT_BUFFER_VALID(i)
    .constant_buffer_invalidate = mw_array(419, 419, 4),        // CONSTANT_BUFFER_INVALIDATE(i)
    .constant_buffer_addr_shift = 6,
    .release = {{
        {
            .enable = mw(320, 320),          // RELEASE_ENABLE(0)
            .structure_size = mw(322, 321),  // RELEASE_STRUCTURE_SIZE(0)
            .membar_type = mw(323, 323),     // RELEASE_MEMBAR_TYPE(0)
            .payload64b = mw(332, 332),      // RELEASE_PAYLOAD64B(0)
            .address_lower = mw(671, 640),   // RELEASE_SEMAPHORE0_ADDR_LOWER
            .address_upper = mw(696, 672),   // RELEASE_SEMAPHORE0_ADDR_UPPER
            .payload_lower = mw(735, 704),   // RELEASE_SEMAPHORE0_PAYLOAD_LOWER
            .payload_upper = mw(767, 736),   // RELEASE_SEMAPHORE0_PAYLOAD_UPPER
        },
        {
            .enable = mw(336, 336),          // RELEASE_ENABLE(1)
            .structure_size = mw(338, 337),  // RELEASE_STRUCTURE_SIZE(1)
            .membar_type = mw(339, 339),     // RELEASE_MEMBAR_TYPE(1)
            .payload64b = mw(348, 348),      // RELEASE_PAYLOAD64B(1)
            .address_lower = mw(799, 768),   // RELEASE_SEMAPHORE1_ADDR_LOWER
            .address_upper = mw(824, 800),   // RELEASE_SEMAPHORE1_ADDR_UPPER
            .payload_lower = mw(863, 832),   // RELEASE_SEMAPHORE1_PAYLOAD_LOWER
            .payload_upper = mw(895, 864),   // RELEASE_SEMAPHORE1_PAYLOAD_UPPER
        },
        {
            .enable = mw(352, 352),          // RELEASE_ENABLE(2)
            .structure_size = mw(354, 353),  // RELEASE_STRUCTURE_SIZE(2)
            .membar_type = mw(355, 355),     // RELEASE_MEMBAR_TYPE(2)
            .payload64b = mw(364, 364),      // RELEASE_PAYLOAD64B(2)
            .address_lower = mw(927, 896),   // RELEASE_SEMAPHORE2_ADDR_LOWER
            .address_upper = mw(952, 928),   // RELEASE_SEMAPHORE2_ADDR_UPPER
            .payload_lower = mw(991, 960),   // RELEASE_SEMAPHORE2_PAYLOAD_LOWER
            .payload_upper = mw(1023, 992),  // RELEASE_SEMAPHORE2_PAYLOAD_UPPER
        },
    }},
    .dependent_qmd0_pointer = mw(479, 448),   // DEPENDENT_QMD0_POINTER
    .dependent_qmd0_enable = mw(368, 368),    // DEPENDENT_QMD_ENABLE(0)
    .dependent_qmd0_action = mw(371, 369),    // DEPENDENT_QMD_ACTION(0)
    .dependent_qmd0_prefetch = mw(372, 372),  // DEPENDENT_QMD_PREFETCH(0)
};

constexpr QmdLayout kV5{
    .version = QmdVersion::kV5,
    .size_bytes = 384,
    .major_version = mw(471, 468),                     // QMD_MAJOR_VERSION
    .minor_version = mw(467, 464),                     // QMD_MINOR_VERSION
    .qmd_type = mw(153, 151),                          // QMD_TYPE
    .sm_global_caching_enable = {},                    // (none)
    .qmd_group_id = mw(149, 144),                      // QMD_GROUP_ID
    .invalidate_texture_header_cache = mw(472, 472),   // INVALIDATE_TEXTURE_HEADER_CACHE
    .invalidate_texture_sampler_cache = mw(473, 473),  // INVALIDATE_TEXTURE_SAMPLER_CACHE
    .invalidate_texture_data_cache = mw(474, 474),     // INVALIDATE_TEXTURE_DATA_CACHE
    .invalidate_shader_data_cache = mw(475, 475),      // INVALIDATE_SHADER_DATA_CACHE
    .api_visible_call_limit = mw(456, 456),            // API_VISIBLE_CALL_LIMIT
    .sampler_index = mw(457, 457),                     // SAMPLER_INDEX
    .cwd_membar_type = mw(625, 624),                   // CWD_MEMBAR_TYPE
    .grid_width = mw(1279, 1248),                      // GRID_WIDTH
    .grid_height = mw(1295, 1280),                     // GRID_HEIGHT
    .grid_depth = mw(1327, 1312),                      // GRID_DEPTH
    .cta_thread_dimension0 = mw(1103, 1088),           // CTA_THREAD_DIMENSION0
    .cta_thread_dimension1 = mw(1119, 1104),           // CTA_THREAD_DIMENSION1
    .cta_thread_dimension2 = mw(1127, 1120),           // CTA_THREAD_DIMENSION2
    .program_address_lower = mw(1055, 1024),           // PROGRAM_ADDRESS_LOWER_SHIFTED4
    .program_address_upper = mw(1076, 1056),           // PROGRAM_ADDRESS_UPPER_SHIFTED4
    .program_address_shift = 4,
    .program_prefetch_addr_lower_shifted = mw(1919, 1888),  // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED
    .program_prefetch_addr_upper_shifted = mw(1936, 1920),  // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED
    .program_prefetch_size = mw(1085, 1077),                // PROGRAM_PREFETCH_SIZE
    .shared_memory_size = mw(1162, 1152),                   // SHARED_MEMORY_SIZE_SHIFTED7
    .shared_memory_shift = 7,
    .min_sm_config_shared_mem_size = mw(1168, 1163),     // MIN_SM_CONFIG_SHARED_MEM_SIZE
    .max_sm_config_shared_mem_size = mw(1174, 1169),     // MAX_SM_CONFIG_SHARED_MEM_SIZE
    .target_sm_config_shared_mem_size = mw(1180, 1175),  // TARGET_SM_CONFIG_SHARED_MEM_SIZE
    .register_count = mw(1136, 1128),                    // REGISTER_COUNT
    .barrier_count = mw(1141, 1137),                     // BARRIER_COUNT
    .shader_local_memory_low_size = mw(1199, 1184),      // SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4
    .shader_local_memory_high_size = mw(1215, 1200),     // SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4
    .shader_local_memory_shift = 4,
    .sass_version = mw(455, 448),  // SASS_VERSION
    .constant_buffer_addr_lower =
        mw_array(1375, 1344, 64),  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(i)
    .constant_buffer_addr_upper =
        mw_array(1394, 1376, 64),  // CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(i)
    .constant_buffer_size_shifted4 = mw_array(1407, 1395, 64),  // CONSTANT_BUFFER_SIZE_SHIFTED4(i)
    .constant_buffer_valid = mw_array(1856, 1856, 4),           // CONSTANT_BUFFER_VALID(i)
    .constant_buffer_invalidate = mw_array(1859, 1859, 4),      // CONSTANT_BUFFER_INVALIDATE(i)
    .constant_buffer_addr_shift = 6,
    .release = {{
        {
            .enable = mw(288, 288),          // RELEASE_ENABLE(0)
            .structure_size = mw(290, 289),  // RELEASE_STRUCTURE_SIZE(0)
            .membar_type = mw(291, 291),     // RELEASE_MEMBAR_TYPE(0)
            .payload64b = mw(300, 300),      // RELEASE_PAYLOAD64B(0)
            .address_lower = mw(511, 480),   // RELEASE_SEMAPHORE0_ADDR_LOWER
            .address_upper = mw(536, 512),   // RELEASE_SEMAPHORE0_ADDR_UPPER
            .payload_lower = mw(575, 544),   // RELEASE_SEMAPHORE0_PAYLOAD_LOWER
            .payload_upper = mw(607, 576),   // RELEASE_SEMAPHORE0_PAYLOAD_UPPER
        },
        {
            .enable = mw(304, 304),          // RELEASE_ENABLE(1)
            .structure_size = mw(306, 305),  // RELEASE_STRUCTURE_SIZE(1)
            .membar_type = mw(307, 307),     // RELEASE_MEMBAR_TYPE(1)
            .payload64b = mw(316, 316),      // RELEASE_PAYLOAD64B(1)
            .address_lower = mw(799, 768),   // RELEASE_SEMAPHORE1_ADDR_LOWER
            .address_upper = mw(824, 800),   // RELEASE_SEMAPHORE1_ADDR_UPPER
            .payload_lower = mw(863, 832),   // RELEASE_SEMAPHORE1_PAYLOAD_LOWER
            .payload_upper = mw(895, 864),   // RELEASE_SEMAPHORE1_PAYLOAD_UPPER
        },
        {
            .enable = mw(320, 320),          // RELEASE_ENABLE(2)
            .structure_size = mw(322, 321),  // RELEASE_STRUCTURE_SIZE(2)
            .membar_type = mw(323, 323),     // RELEASE_MEMBAR_TYPE(2)
            .payload64b = mw(332, 332),      // RELEASE_PAYLOAD64B(2)
            .address_lower = mw(927, 896),   // RELEASE_SEMAPHORE2_ADDR_LOWER
            .address_upper = mw(952, 928),   // RELEASE_SEMAPHORE2_ADDR_UPPER
            .payload_lower = mw(991, 960),   // RELEASE_SEMAPHORE2_PAYLOAD_LOWER
            .payload_upper = mw(1023, 992),  // RELEASE_SEMAPHORE2_PAYLOAD_UPPER
        },
    }},
    .dependent_qmd0_pointer = mw(415, 384),   // DEPENDENT_QMD0_POINTER
    .dependent_qmd0_enable = mw(336, 336),    // DEPENDENT_QMD0_ENABLE
    .dependent_qmd0_action = mw(339, 337),    // DEPENDENT_QMD0_ACTION
    .dependent_qmd0_prefetch = mw(340, 340),  // DEPENDENT_QMD0_PREFETCH
};

}  // namespace

const QmdLayout& qmd_layout(QmdVersion v) {
  switch (v) {
    case QmdVersion::kV3:
      return kV3;
    case QmdVersion::kV4:
      return kV4;
    case QmdVersion::kV5:
      return kV5;
  }
  UNREACHABLE() << "QMD version " << static_cast<int>(v);
}

}  // namespace baregrad::nv
