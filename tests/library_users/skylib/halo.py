from skylib import Source


class Halo(Source):
    """A source with a halo: a Module through `skylib`'s `*` re-export."""

    radius: float

    def __init__(self, flux, centre, radius):
        super().__init__(flux, centre)
        self.radius = radius
