"""Metal Shading Language text: the prelude the shared kernel descriptions (kernels/gpu/) render into."""
