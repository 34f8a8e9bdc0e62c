"""A stand-in for astropy's WCS: per-image metadata with a multi-line repr."""


class WCS:
    def __init__(self, pixel_scale, origin):
        self.pixel_scale = pixel_scale
        self.origin = origin

    def to_pixels(self, position):
        return (position - self.origin) / self.pixel_scale

    def __repr__(self):
        return (
            f"WCS(\n    pixel_scale={self.pixel_scale},\n    origin={self.origin},\n)"
        )
