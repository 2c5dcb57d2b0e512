"""Integrations of qattn with model frameworks. Nothing here is imported by
`import qattn`; each submodule imports its framework itself:

  qattn.integrations.transformers   a paged fp8/int8 KV cache and a decode
                                    attention function for Hugging Face
                                    transformers (docs/python.md)
  qattn.integrations.paged_kv       the framework-free part: per-layer paged
                                    caches written by qattn's KV store and
                                    read by qattn's decode (torch only)
"""
