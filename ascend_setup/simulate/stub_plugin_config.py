"""The stub vllm-ascend's `ascend_config.py`, `envs.py` and the other modules that read `additional_config`
(`utils.py`, `attention/kvcomp_attn/attention_utils.py`), shaped like the real 0.23.0's (read from its sdist):
the same keys, sub-keys and variables, read in the same ways (`additional_config.get`, sub-config classes taking
`**kwargs` or a dict, `_get_config_value` falling back to a deprecated variable, the `env_variables` dict), so
`serve` validates against the simulated host exactly as against a real one. The live test
(tests/e2e/test_serve_live.py, marked live) checks that the key sets equal the real sdist's."""

ASCEND_CONFIG = '''\
"""Configuration Object for additional_config (stub of vllm-ascend 0.23.0's; unknown keys are ignored)."""
import os
from typing import Any

from vllm_ascend import envs as ascend_envs


class AscendConfig:
    def __init__(self, vllm_config):
        self.vllm_config = vllm_config
        additional_config = vllm_config.additional_config if vllm_config.additional_config is not None else {}
        xlite_graph_config = additional_config.get("xlite_graph_config", {})
        self.xlite_graph_config = XliteGraphConfig(xlite_graph_config, vllm_config)
        ascend_compilation_config = additional_config.get("ascend_compilation_config", {})
        self.ascend_compilation_config = AscendCompilationConfig(**ascend_compilation_config)
        ascend_fusion_config = additional_config.get("ascend_fusion_config", {})
        self.ascend_fusion_config = AscendFusionConfig(**ascend_fusion_config)
        finegrained_tp_config = additional_config.get("finegrained_tp_config", {})
        self.finegrained_tp_config = FinegrainedTPConfig(finegrained_tp_config, vllm_config)
        eplb_config = additional_config.get("eplb_config", {})
        self.eplb_config = EplbConfig(eplb_config)
        weight_prefetch_config = additional_config.get("weight_prefetch_config", {})
        self.weight_prefetch_config = WeightPrefetchConfig(weight_prefetch_config)
        profiling_chunk_config = additional_config.get("profiling_chunk_config", {})
        self.profiling_chunk_config = ProfilingChunkConfig(profiling_chunk_config)
        rejection_sampler_config = additional_config.get("rejection_sampler_config", {})
        self.rejection_sampler_config = RejectionSamplerConfig(rejection_sampler_config)
        self.enable_balance_scheduling = self._get_config_value(
            additional_config, "enable_balance_scheduling", "VLLM_ASCEND_BALANCE_SCHEDULING",
            ascend_envs.VLLM_ASCEND_BALANCE_SCHEDULING)
        self.enable_flashcomm1 = self._get_config_value(
            additional_config, "enable_flashcomm1", "VLLM_ASCEND_ENABLE_FLASHCOMM1",
            ascend_envs.VLLM_ASCEND_ENABLE_FLASHCOMM1)
        self.enable_matmul_allreduce = self._get_config_value(
            additional_config, "enable_matmul_allreduce", "VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE",
            ascend_envs.VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE)
        self.enable_fused_mc2 = self._get_config_value(
            additional_config, "enable_fused_mc2", "VLLM_ASCEND_ENABLE_FUSED_MC2",
            ascend_envs.VLLM_ASCEND_ENABLE_FUSED_MC2)
        self.enable_mlapo = self._get_config_value(
            additional_config, "enable_mlapo", "VLLM_ASCEND_ENABLE_MLAPO", ascend_envs.VLLM_ASCEND_ENABLE_MLAPO)
        self.enable_flashcomm2_parallel_size = self._get_config_value(
            additional_config, "enable_flashcomm2_parallel_size", "VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE",
            ascend_envs.VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE)
        self.msmonitor_use_daemon = self._get_config_value(
            additional_config, "msmonitor_use_daemon", "MSMONITOR_USE_DAEMON", ascend_envs.MSMONITOR_USE_DAEMON)
        self.enable_transpose_kv_cache_by_block = self._get_config_value(
            additional_config, "enable_transpose_kv_cache_by_block",
            "VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK",
            ascend_envs.VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK)
        self.weight_nz_mode = self._get_config_value(
            additional_config, "weight_nz_mode", "VLLM_ASCEND_ENABLE_NZ", ascend_envs.VLLM_ASCEND_ENABLE_NZ)
        self.dump_config_path = additional_config.get("dump_config_path")
        self.dump_config = additional_config.get("dump_config")
        self.ascend_log_path = additional_config.get("ascend_log_path", os.path.expanduser("~/ascend/log"))
        self.layer_sharding = additional_config.get("layer_sharding", None)
        self.enable_shared_expert_dp = additional_config.get("enable_shared_expert_dp", False)
        self.multistream_overlap_shared_expert = additional_config.get("multistream_overlap_shared_expert", False)
        self.multistream_overlap_gate = additional_config.get("multistream_overlap_gate", False)
        self.recompute_scheduler_enable = additional_config.get("recompute_scheduler_enable", False)
        self.enable_cpu_binding = additional_config.get("enable_cpu_binding", True)
        self.enable_sleep_mode_extra_cleanup = additional_config.get("enable_sleep_mode_extra_cleanup", False)
        self.multistream_dsv4_dsa_overlap = additional_config.get("multistream_dsv4_dsa_overlap", True)
        self.enable_prefill_mc2 = bool(additional_config.get("enable_prefill_mc2", False))
        self.SLO_limits_for_dynamic_batch = additional_config.get("SLO_limits_for_dynamic_batch", -1)
        self.pa_shape_list = additional_config.get("pa_shape_list", [])
        self.enable_async_exponential = bool(additional_config.get("enable_async_exponential", False))
        self.enable_kv_nz = additional_config.get("enable_kv_nz", False)
        self.enable_sparse_sfa_c8 = additional_config.get("enable_sparse_sfa_c8", False)
        self.enable_sparse_li_c8 = additional_config.get("enable_sparse_li_c8", False)
        self.c8_enable_reshape_optim = additional_config.get("c8_enable_reshape_optim", False)
        self.enable_mc2_hierarchy_comm = additional_config.get("enable_mc2_hierarchy_comm", False)
        self.mega_moe_max_tokens = additional_config.get("mega_moe_max_tokens", 65536)
        self.dp_allreduce_on_npu = additional_config.get("dp_allreduce_on_npu", False)
        self.enable_reduce_sample = additional_config.get("enable_reduce_sample", False)
        self.mix_placement = additional_config.get("mix_placement", False)
        self.hamming_sparse = additional_config.get("hamming_sparse", {"enabled": False, "sparse_json_location": ""})

    @staticmethod
    def _get_config_value(additional_config: dict, config_key: str, env_key: str, env_value: Any) -> Any:
        if config_key in additional_config:
            return additional_config[config_key]
        return env_value


class FinegrainedTPConfig:
    def __init__(self, finegrained_tp_config: dict, vllm_config):
        self.oproj_tensor_parallel_size = finegrained_tp_config.get("oproj_tensor_parallel_size", 0)
        self.lmhead_tensor_parallel_size = finegrained_tp_config.get("lmhead_tensor_parallel_size", 0)
        self.embedding_tensor_parallel_size = finegrained_tp_config.get("embedding_tensor_parallel_size", 0)
        self.mlp_tensor_parallel_size = finegrained_tp_config.get("mlp_tensor_parallel_size", 0)
        self.olora_tensor_parallel_size = finegrained_tp_config.get("olora_tensor_parallel_size", 0)


class AscendCompilationConfig:
    def __init__(self, enable_npugraph_ex: bool = True, enable_static_kernel: bool = False,
                 fuse_norm_quant: bool = True, fuse_qknorm_rope: bool = True, fuse_allreduce_rms: bool = False,
                 **kwargs):
        self.enable_npugraph_ex = enable_npugraph_ex
        self.enable_static_kernel = enable_static_kernel
        self.fuse_norm_quant = fuse_norm_quant
        self.fuse_qknorm_rope = fuse_qknorm_rope
        self.fuse_allreduce_rms = fuse_allreduce_rms
        self.fuse_muls_add = kwargs.get("fuse_muls_add", True)


class AscendFusionConfig:
    def __init__(self, fusion_ops_gmmswigluquant: bool = True, **kwargs):
        self.fusion_ops_gmmswigluquant = fusion_ops_gmmswigluquant


class XliteGraphConfig:
    def __init__(self, xlite_graph_config, vllm_config):
        self.enabled = xlite_graph_config.get("enabled", False)
        self.full_mode = xlite_graph_config.get("full_mode", False)


class WeightPrefetchConfig:
    prefetch_ratio = {}

    def __init__(self, weight_prefetch_config: dict):
        self.enabled = weight_prefetch_config.get("enabled", False)
        self.prefetch_ratio = weight_prefetch_config.get("prefetch_ratio", self.prefetch_ratio)


class ProfilingChunkConfig:
    def __init__(self, config=None):
        config = config or {}
        self.enabled = config.get("enabled", False)
        self.smooth_factor = float(config.get("smooth_factor", 1.0))
        self.min_chunk = int(config.get("min_chunk", 4096))
        self.need_timing = config.get("need_timing", self.enabled)
        self.max_fit_chunk = int(config.get("max_fit_chunk", 30))


class RejectionSamplerConfig:
    def __init__(self, config=None):
        config = config or {}
        self.enable_block_verify = config.get("enable_block_verify", False)
        self.enable_entropy_verify = config.get("enable_entropy_verify", False)
        self.posterior_threshold = config.get("posterior_threshold", 0.95)
        self.posterior_alpha = config.get("posterior_alpha", 0.4)


class EplbConfig:
    _defaults = {
        "dynamic_eplb": False,
        "expert_map_path": None,
        "expert_heat_collection_interval": 600,
        "algorithm_execution_interval": 50,
        "expert_map_record_path": None,
        "num_redundant_experts": 0,
        "eplb_policy_type": 2,
        "eplb_heat_collection_stage": "all",
    }

    def __init__(self, user_config=None):
        self.config = dict(self._defaults)
        for key, value in (user_config or {}).items():
            if key not in self.config:
                raise ValueError(f"Config has no attribute '{key}'")
            self.config[key] = value


def init_ascend_config(vllm_config):
    additional_config = vllm_config.additional_config if vllm_config.additional_config is not None else {}
    refresh = additional_config.get("refresh", False) if additional_config else False
    return AscendConfig(vllm_config)
'''

ENVS = '''\
"""Environment variables vllm-ascend reads (stub of 0.23.0's envs.py: the same names)."""
import os
from typing import Any, Callable, Dict

env_variables: Dict[str, Callable[[], Any]] = {
    "MAX_JOBS": lambda: os.getenv("MAX_JOBS", None),
    "CMAKE_BUILD_TYPE": lambda: os.getenv("CMAKE_BUILD_TYPE"),
    "COMPILE_CUSTOM_KERNELS": lambda: bool(int(os.getenv("COMPILE_CUSTOM_KERNELS", "1"))),
    "CXX_COMPILER": lambda: os.getenv("CXX_COMPILER", None),
    "C_COMPILER": lambda: os.getenv("C_COMPILER", None),
    "SOC_VERSION": lambda: os.getenv("SOC_VERSION", None),
    "VERBOSE": lambda: bool(int(os.getenv("VERBOSE", "0"))),
    "ASCEND_HOME_PATH": lambda: os.getenv("ASCEND_HOME_PATH", None),
    "HCCL_SO_PATH": lambda: os.getenv("HCCL_SO_PATH", None),
    "VLLM_VERSION": lambda: os.getenv("VLLM_VERSION", None),
    "VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE": lambda: bool(int(os.getenv("VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE", "0"))),
    # DEPRECATED: use additional_config.enable_flashcomm1 instead.
    "VLLM_ASCEND_ENABLE_FLASHCOMM1": lambda: bool(int(os.getenv("VLLM_ASCEND_ENABLE_FLASHCOMM1", "0"))),
    "VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE": lambda: int(os.getenv("VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE", 0)),
    "MSMONITOR_USE_DAEMON": lambda: bool(int(os.getenv("MSMONITOR_USE_DAEMON", "0"))),
    "VLLM_ASCEND_ENABLE_MLAPO": lambda: bool(int(os.getenv("VLLM_ASCEND_ENABLE_MLAPO", "1"))),
    "VLLM_ASCEND_ENABLE_NZ": lambda: int(os.getenv("VLLM_ASCEND_ENABLE_NZ", 1)),
    "DYNAMIC_EPLB": lambda: os.getenv("DYNAMIC_EPLB", "false").lower(),
    "VLLM_ASCEND_ENABLE_FUSED_MC2": lambda: int(os.getenv("VLLM_ASCEND_ENABLE_FUSED_MC2", "0")),
    "VLLM_ASCEND_BALANCE_SCHEDULING": lambda: bool(int(os.getenv("VLLM_ASCEND_BALANCE_SCHEDULING", "0"))),
    "VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK": lambda: bool(
        int(os.getenv("VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK", "1"))),
    "VLLM_ASCEND_ENABLE_BATCH_MEMCPY": lambda: os.getenv("VLLM_ASCEND_ENABLE_BATCH_MEMCPY", None),
}


def __getattr__(name: str):
    if name in env_variables:
        return env_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''

UTILS = '''\
"""Utilities (stub of 0.23.0's utils.py: the additional_config key it reads, read the same way)."""


def enable_dsa_cp(vllm_config) -> bool:
    dsa_cp_enable = False
    additional_config = getattr(vllm_config, "additional_config", None)
    if additional_config is not None and "enable_dsa_cp" in additional_config:
        dsa_cp_enable = bool(additional_config["enable_dsa_cp"])
    return dsa_cp_enable
'''

KVCOMP_ATTENTION_UTILS = '''\
"""Hamming sparse attention (stub of 0.23.0's attention/kvcomp_attn/attention_utils.py)."""


def is_hamming_sparse(vllm_config) -> bool:
    additional_config = vllm_config.additional_config if vllm_config.additional_config is not None else {}
    enable_hamming_sparse = additional_config.get("enable_hamming_sparse", False)
    return enable_hamming_sparse
'''

#: The stub plugin's configuration sources, by their path in the package.
FILES = {
    "vllm_ascend/ascend_config.py": ASCEND_CONFIG,
    "vllm_ascend/envs.py": ENVS,
    "vllm_ascend/utils.py": UTILS,
    "vllm_ascend/attention/kvcomp_attn/attention_utils.py": KVCOMP_ATTENTION_UTILS,
}
